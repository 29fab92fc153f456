"""Reporting a batch on GitHub (SPEC §5.6): the one status comment on the initiative issue, the
check run `imm: <slug>` on the batch head, and the pull request from the batch branch."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from imm_action.github.client import BODY_LIMIT, GitHubClient, fit_body
from imm_action.github.transport import PullRequestsRefusedError
from imm_action.model.outcome import Failure
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, BatchState, ChildState
from imm_action.render import github_batch_markdown

CONCLUSIONS: Mapping[BatchState, str | None] = {
    BatchState.PREPARED: None,
    BatchState.RUNNING: None,
    BatchState.COMPLETED: "success",
    BatchState.NEEDS_HUMAN: "action_required",
    BatchState.BUDGET_STOPPED: "neutral",
    BatchState.FAILED: "failure",
    BatchState.REJECTED: "failure",
    BatchState.CANCELLED: "cancelled",
}


def status_marker(slug: str) -> str:
    return f"<!-- imm-status:{slug} -->"


def check_name(slug: str) -> str:
    return f"imm: {slug}"


# what GitHub takes of a report: the notes publish_report adds below it (a footer, the compare
# link) get room of their own
NOTES_ROOM = 1_000
SHORTER_OUTPUTS = (12, 0)  # lines of each failed command's output, tried in turn


def status_comment(
    report: BatchRunReport,
    state: BatchRunState,
    repository_url: str,
    limit: int = BODY_LIMIT - NOTES_ROOM,
) -> str:
    """The status comment's text; its wording is part of the interface (golden-file tested)."""
    marker = status_marker(report.initiative_slug)
    return fitted(
        report, lambda shown: f"{marker}\n{github_batch_markdown(shown, state, repository_url)}",
        limit,
    )  # fmt: skip


def fitted(
    report: BatchRunReport,
    render: Callable[[BatchRunReport], str],
    limit: int = BODY_LIMIT - NOTES_ROOM,
) -> str:
    """`render(report)`, or, longer than `limit`, with the failed commands' outputs shortened
    to their last lines, then left out (the job summary and `imm status` show them whole); cut
    as a last resort."""
    for most in (None, *SHORTER_OUTPUTS):
        text = render(report if most is None else with_outputs_cut(report, most))
        if len(text) <= limit:
            return text
    return fit_body(text, limit)


def with_outputs_cut(report: BatchRunReport, most: int) -> BatchRunReport:
    """`report` with each failed command's output cut to its last `most` lines, saying so."""

    def cut(failure: Failure) -> Failure:
        lines = failure.output_tail.splitlines()
        if len(lines) <= most:
            return failure
        kept = "\n".join(lines[-most:]) if most else ""
        said = "earlier lines of its output" if most else "its output"
        note = (
            f"({said} left out: GitHub takes {BODY_LIMIT:,} characters here; the job summary and "
            "`imm status` show it whole)"
        )
        return failure.model_copy(update={"output_tail": f"{note}\n{kept}".rstrip("\n")})

    children = [
        child.model_copy(update={"failures": [cut(failure) for failure in child.failures]})
        for child in report.children
    ]
    branch_failures = [cut(failure) for failure in report.branch_failures]
    return report.model_copy(update={"children": children, "branch_failures": branch_failures})


@dataclass(frozen=True)
class ReportTarget:
    issue_number: int | None  # the initiative issue; None for a locally carried initiative
    head_sha: str
    repository_url: str
    close_integrated: bool = False
    task_issues: Mapping[str, int] | None = None  # task id -> its issue, when carried by GitHub
    footer: str = ""  # a note below the report (e.g. what the default token cannot do)
    # commits an earlier report may have put a running check on (the base branch's head, the
    # batch head before this pass): a check still going there is ended, said superseded
    earlier_heads: tuple[str, ...] = ()


def publish_report(
    client: GitHubClient, report: BatchRunReport, state: BatchRunState, target: ReportTarget
) -> None:
    """Comment, check run and pull request, each idempotent: a pass may publish any number of
    times and GitHub ends up with one of each, showing the newest report."""
    room = BODY_LIMIT - NOTES_ROOM - len(target.footer)
    body = status_comment(report, state, target.repository_url, room)
    if target.footer:
        body += f"\n{target.footer}\n"
    slug = report.initiative_slug
    if report.commits:
        # First, so a refusal is said in the comment and the check run, not a failure.
        try:
            client.ensure_pull(state.branch, state.base_ref, f"imm: {slug}", body)
        except PullRequestsRefusedError:
            compare = f"{target.repository_url}/compare/{state.base_ref}...{state.branch}"
            body += (
                "\n_This repository does not allow GitHub Actions to create pull requests: "
                f"open one from [`{state.branch}`]({compare}), or allow it in the repository's "
                "Actions settings._\n"
            )
    if target.issue_number is not None:
        client.upsert_comment(target.issue_number, status_marker(slug), body)
    client.report_check(
        target.head_sha,
        check_name(slug),
        conclusion=CONCLUSIONS[report.batch_state],
        title=f"{report.batch_state}: {report.reason}"[:255],
        summary=body,
    )
    moved_to = f"{state.branch} moved on to {target.head_sha[:12]}"
    for earlier in dict.fromkeys(target.earlier_heads):
        if earlier != target.head_sha:
            client.end_check(earlier, check_name(slug), conclusion="neutral",
                             title=f"superseded: {moved_to}")  # fmt: skip
    if target.close_integrated and target.task_issues:
        for child in report.children:
            number = target.task_issues.get(child.task_id)
            if child.state.done and number is not None:
                client.close_issue(number)


def target_for(state: BatchRunState, head_sha: str, repository_url: str) -> ReportTarget:
    return ReportTarget(
        issue_number=state.carrier.issue, head_sha=head_sha, repository_url=repository_url
    )


def needs_continuation(state: BatchRunState, round_alive: Callable[[int], bool]) -> bool:
    """Whether the batch waits on lanes nobody will start: running, nothing in flight, and a
    pending child whose dependencies are done (the matrix of this run has finished); or on
    verify jobs nobody will start: a stack whose verify jobs left a shard without a verdict,
    its lanes ended (issue 32), in a round no run still in progress will take (ADR 0075)."""
    if state.batch_state is not BatchState.RUNNING:
        return False
    owed = [r for r in state.verify_rounds if not round_alive(r.run_id)]
    if owed and not any(
        child.state in (ChildState.LANE_ADMITTED, ChildState.SETTLED) for child in state.children
    ):
        return True
    if any(child.state.in_flight for child in state.children):
        return False
    done = {child.task_id for child in state.children if child.state.done}
    return any(
        str(child.state) == "pending" and set(child.blocked_by) <= done for child in state.children
    )
