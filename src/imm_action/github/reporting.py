"""Reporting a batch on GitHub (SPEC §5.6): the one status comment on the initiative issue, the
check run `imm: <slug>` on the batch head, and the pull request from the batch branch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from imm_action.github.client import GitHubClient
from imm_action.github.transport import PullRequestsRefusedError
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


def status_comment(report: BatchRunReport, state: BatchRunState, repository_url: str) -> str:
    """The status comment's text; its wording is part of the interface (golden-file tested)."""
    return "\n".join(
        [
            status_marker(report.initiative_slug),
            github_batch_markdown(report, state, repository_url),
        ]
    )


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
    body = status_comment(report, state, target.repository_url)
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


def needs_continuation(state: BatchRunState) -> bool:
    """Whether the batch waits on lanes nobody will start: running, nothing in flight, and a
    pending child whose dependencies are done (the matrix of this run has finished); or on
    verify jobs nobody will start: a stack whose verify jobs left a shard without a verdict,
    its lanes ended (issue 32)."""
    if state.batch_state is not BatchState.RUNNING:
        return False
    if state.verifying is not None and not any(
        child.state in (ChildState.LANE_ADMITTED, ChildState.SETTLED) for child in state.children
    ):
        return True
    if any(child.state.in_flight for child in state.children):
        return False
    done = {child.task_id for child in state.children if child.state.done}
    return any(
        str(child.state) == "pending" and set(child.blocked_by) <= done for child in state.children
    )
