"""Job summaries (`$GITHUB_STEP_SUMMARY`): what a plan, lane or integrate job did, with links."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.model.outcome import LaneOutcome
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, GithubRunner
from imm_action.render import failure_details, job_summary


def pass_summary(
    report: BatchRunReport,
    state: BatchRunState,
    repository_url: str,
    integration: Sequence[str] = (),
) -> str:
    """The status comment's text (state, why, next, table, DAG coloured by state), what this
    pass's integration verified (each stack: its lanes, its check runs, what bisection found)
    and a link to the job of every lane in flight (to its workflow run until a pass has found
    the job)."""
    body = job_summary(report, state, repository_url)
    if integration:
        body += "\n### Integration\n\n" + "\n".join(f"- {line}" for line in integration) + "\n"
    links = []
    for child in state.children:
        runner = child.lane.runner if child.lane is not None else None
        if child.state.in_flight and isinstance(runner, GithubRunner):
            url = runner.job_url or f"{repository_url}/actions/runs/{runner.run_id}"
            links.append(f"- `{child.task_id}`: [imm lane {child.task_id}]({url})")
    if links:
        body += "\n### Lane jobs\n\n" + "\n".join(links) + "\n"
    return body


def lane_summary(outcome: LaneOutcome) -> str:
    """A lane job's result: settled with its commit, or why it needs a person and the output
    of each failing check."""
    lines = [f"## imm lane `{outcome.task_id}`: {outcome.state}", ""]
    if outcome.lane_commit:
        lines.append(f"Lane commit `{outcome.lane_commit}`.")
    if outcome.reason:
        lines.append(f"**Why:** {outcome.reason}")
    lines.append(f"QA failures: {outcome.qa_failures}.")
    if outcome.failures:
        if outcome.state == "settled":
            lines += ["", "It passed after an earlier attempt failed:"]
        lines.append("")
        lines.extend(failure_details(outcome.task_id, outcome.failures))
    return "\n".join(lines) + "\n"
