"""Job summaries (`$GITHUB_STEP_SUMMARY`): what a plan, lane or integrate job did, with links."""

from __future__ import annotations

import html
from collections.abc import Sequence

from imm_action.costs import run_line, spend_text
from imm_action.errors import Problem
from imm_action.model.outcome import CheckResult, LaneOutcome
from imm_action.model.report import BatchRunReport
from imm_action.model.spend import spend_of_runs
from imm_action.model.state import BatchRunState, GithubRunner
from imm_action.render import job_summary
from imm_action.render.failures import code_fence, failure_details
from imm_action.render.inert import inert
from imm_action.text import plural


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
        lines.append(f"**Why:** {inert(outcome.reason)}")
    lines.append(f"QA failures: {outcome.qa_failures}.")
    if outcome.agent_runs:  # what its agent runs cost (issue 45)
        spend = spend_of_runs(outcome.agent_runs)
        runs = "; ".join(run_line(run) for run in outcome.agent_runs)
        lines.append(f"Agent: {spend_text(spend)} over {plural(spend.runs, 'run')} ({runs}).")
    if outcome.failures:
        if outcome.state == "settled":
            lines += ["", "It passed after an earlier attempt failed:"]
        lines.append("")
        lines.extend(failure_details(outcome.task_id, outcome.failures))
    return "\n".join(lines) + "\n"


def shard_summary(index: int, shards: int, results: Sequence[tuple[str, str, CheckResult]]) -> str:
    """A verify job's shard (issue 32): each check it ran, on which tree, how it ended and how
    long it took; a failed check's output tail below."""
    total = sum(result.duration_ms for _, _, result in results) / 1000
    lines = [
        f"## imm verify {index}/{shards}: {len(results)} checks, {total:.1f} s of checks", "",
        "| check | tree | result | seconds |", "| --- | --- | --- | --- |",
    ]  # fmt: skip
    for tree, _, result in results:
        ended = "passed" if result.passed else ("timed out" if result.timed_out else "failed")
        name = result.check_id.replace("|", "\\|")
        lines.append(f"| `{name}` | `{tree[:12]}` | {ended} | {result.duration_ms / 1000:.1f} |")
    for tree, _, result in results:
        if not result.passed:
            fence = code_fence(result.output_tail)
            title = f"{html.escape(result.check_id)} on {tree[:12]}"
            tail = result.output_tail or result.error or "(no output)"
            lines += ["", f"<details><summary>{title}</summary>", "", f"{fence}text", tail,
                      fence, "</details>"]  # fmt: skip
    return "\n".join(lines) + "\n"


def config_warnings_markdown(warnings: Sequence[Problem]) -> str:
    """The config's warnings for a job summary: each unknown key at its file and line, with
    the key it may misspell (issue 44: a misspelled key was silent in the jobs)."""
    lines = [f"- `{html.escape(warning.render())}`" for warning in warnings]
    return "### Config warnings\n\n" + "\n".join(lines) + "\n"
