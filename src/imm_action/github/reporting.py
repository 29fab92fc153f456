"""Reporting a batch on GitHub (SPEC §5.6): the one status comment on the initiative issue, the
check run `imm: <slug>` on the batch head, and the pull request from the batch branch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from imm_action.github.client import GitHubClient
from imm_action.model.initiative import GithubCarrier
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, BatchState
from imm_action.render import batch_body

STATE_ICONS: Mapping[str, str] = {
    "pending": "⏳", "lane_admitted": "🏃", "settled": "🏃", "lane_committed": "📦",
    "integrated": "✅", "released": "✅", "needs_human": "🛑", "skipped_blocked": "⏭️",
}  # fmt: skip
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
    rows = []
    for child in report.children:
        commit = (
            f"[`{child.commit[:12]}`]({repository_url}/commit/{child.commit})"
            if child.commit
            else "—"
        )
        lane = f"`{child.lane_branch}`" if child.lane_branch else "—"
        reason = (child.reason or "—").replace("|", "\\|").replace("\n", " ")
        icon = STATE_ICONS.get(str(child.state), "")
        rows.append(f"| {icon} `{child.task_id}` | {child.state} | {lane} | {reason} | {commit} |")
    done = sum(1 for child in report.children if child.state.done)
    lanes = report.lanes_started
    return "\n".join(
        [
            status_marker(report.initiative_slug),
            f"## imm: `{report.initiative_slug}` is {report.batch_state}",
            "",
            f"{done} of {len(report.children)} tasks integrated into `{state.branch}` · "
            f"batch `{report.batch_id}` · {lanes} lane{'s' if lanes != 1 else ''} started",
            *batch_body(report, state, rows),
        ]
    )


@dataclass(frozen=True)
class ReportTarget:
    issue_number: int | None  # the initiative issue; None for a locally carried initiative
    head_sha: str
    repository_url: str
    close_integrated: bool = False
    task_issues: Mapping[str, int] | None = None  # task id -> its issue, when carried by GitHub


def publish_report(
    client: GitHubClient, report: BatchRunReport, state: BatchRunState, target: ReportTarget
) -> None:
    """Comment, check run and pull request, each idempotent: a pass may publish any number of
    times and GitHub ends up with one of each, showing the newest report."""
    body = status_comment(report, state, target.repository_url)
    slug = report.initiative_slug
    if target.issue_number is not None:
        client.upsert_comment(target.issue_number, status_marker(slug), body)
    client.report_check(
        target.head_sha,
        check_name(slug),
        conclusion=CONCLUSIONS[report.batch_state],
        title=f"{report.batch_state}: {report.reason}"[:255],
        summary=body,
    )
    if report.commits:
        client.ensure_pull(state.branch, state.base_ref, f"imm: {slug}", body)
    if target.close_integrated and target.task_issues:
        for child in report.children:
            number = target.task_issues.get(child.task_id)
            if child.state.done and number is not None:
                client.close_issue(number)


def target_for(state: BatchRunState, head_sha: str, repository_url: str) -> ReportTarget:
    issue = state.carrier.issue_number if isinstance(state.carrier, GithubCarrier) else None
    return ReportTarget(issue_number=issue, head_sha=head_sha, repository_url=repository_url)


def needs_continuation(state: BatchRunState) -> bool:
    """Whether the batch waits on lanes nobody will start: running, nothing in flight, and a
    pending child whose dependencies are done (the matrix of this run has finished)."""
    if state.batch_state is not BatchState.RUNNING:
        return False
    if any(child.state.in_flight for child in state.children):
        return False
    done = {child.task_id for child in state.children if child.state.done}
    return any(
        str(child.state) == "pending" and set(child.blocked_by) <= done for child in state.children
    )
