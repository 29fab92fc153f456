"""Text renderings for people (pure): batches as Markdown tables and a Mermaid DAG, and the next
commands to paste (plans: `render.plan`; failed commands: `render.failures`). Every place that
shows a batch — `imm status`, `imm run`'s summary and live view, the status comment, the job
summary — renders through here, so they say the same thing."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from imm_action.costs import cost_cell
from imm_action.model.report import BatchRunReport, ReportChild
from imm_action.model.shard import shard_line
from imm_action.model.state import (
    BatchRunState,
    BatchState,
    ChildState,
    Continuation,
    flaky_said,
)
from imm_action.render.failures import failure_details, failures_markdown, folded_failures
from imm_action.render.inert import code_span, inert
from imm_action.render.plan import cell, mermaid_dag
from imm_action.text import plural

BATCH_STYLES: Mapping[str, str] = {
    "pending": "fill:#f6f8fa,stroke:#8c959f",
    "lane_admitted": "fill:#ddf4ff,stroke:#0969da",
    "settled": "fill:#ddf4ff,stroke:#0969da",
    "lane_committed": "fill:#fbefff,stroke:#8250df",
    "integrated": "fill:#dafbe1,stroke:#1a7f37",
    "released": "fill:#dafbe1,stroke:#1a7f37",
    "needs_human": "fill:#ffebe9,stroke:#cf222e",
    "skipped_blocked": "fill:#fff8c5,stroke:#9a6700",
}


def batch_markdown(
    report: BatchRunReport, state: BatchRunState, commands: Sequence[str] = ()
) -> str:
    costs = cost_cells(report)
    rows = [
        f"| `{child.task_id}` | {child.state} | {cell(child.lane_branch)} | {cell(child.reason)} "
        f"| {f'`{child.commit[:12]}`' if child.commit else '—'} |{_cost_cell(costs, child)}"
        for child in report.children
    ]
    return "\n".join(
        [
            f"# Batch `{report.batch_id}`: {report.batch_state}",
            *batch_body(report, state, rows, commands),
        ]
    )


def batch_body(
    report: BatchRunReport, state: BatchRunState, rows: list[str], commands: Sequence[str] = ()
) -> list[str]:
    """Why, next (with the commands to paste), the task table, the failed commands and the
    state-coloured DAG: shared by every batch view."""
    closures = {child.task_id: child.blocked_by for child in state.children}
    status = {child.task_id: str(child.state) for child in state.children}
    order = [child.task_id for child in state.children]
    paste = ["", "```", *commands, "```"] if commands else []
    continued = ["", continuation_line(report.continues)] if report.continues else []
    costs = cost_cells(report)
    return [
        *continued,
        "",
        f"**Why:** {inert(report.reason)}",
        "",
        f"**Next:** {inert(report.next_action)}",
        *paste,
        *(["", f"**Cost:** {report.cost}"] if report.cost else []),
        "",
        "| task | state | lane | reason | commit |" + (" cost |" if costs else ""),
        "|---|---|---|---|---|" + ("---|" if costs else ""),
        *rows,
        "",
        *adopted_markdown(report),
        *retired_markdown(state),
        *flaky_markdown(state),
        *failures_markdown(report.children),
        *failure_details(state.branch, report.branch_failures),
        "```mermaid",
        mermaid_dag(order, closures, status, [], BATCH_STYLES, notes=costs),
        "```",
        "",
    ]


def retired_markdown(state: BatchRunState) -> list[str]:
    """The tests each landed task retired (issue 58), every id a code span: an intent's text
    is never Markdown that renders."""
    lines = [
        f"- `{child.task_id}` retired " + ", ".join(code_span(test) for test in child.retired_tests)
        for child in state.children
        if child.retired_tests and child.state.done
    ]
    return [*lines, ""] if lines else []


def flaky_markdown(state: BatchRunState) -> list[str]:
    """The tests seen to flip (issue 61), every id a code span: a test's id is the suite's text,
    never Markdown that renders."""
    lines = [f"- flaky: {code_span(test)} {said}" for test, said in flaky_said(state)]
    return [*lines, ""] if lines else []


def cost_cells(report: BatchRunReport) -> dict[str, str]:
    """Each task's cost (`$0.92`) when any agent run reported, else nothing: a table shows a
    cost column only where a cost is known (issue 45)."""
    if report.spend is None or not report.spend.reported:
        return {}
    return {child.task_id: cost_cell(child.spend) for child in report.children}


def _cost_cell(costs: Mapping[str, str], child: ReportChild) -> str:
    """A markdown row's cost cell, when the table has a cost column."""
    return f" {costs[child.task_id]} |" if costs else ""


def adopted_markdown(report: BatchRunReport) -> list[str]:
    """People's pushes the batch adopted (never a lane's): one bullet each."""
    lines = [*report.unconfined, *report.branch_checks, *report.adopted, *report.quarantined]
    return [*(f"- {inert(line)}" for line in lines), ""] if lines else []


# -- what to do next --------------------------------------------------------------------------
@dataclass(frozen=True)
class NextCommand:
    """One command that gets a stopped batch moving, in both of the forms a person may use."""

    args: tuple[str, ...]  # after the program name: ("retry", "<slug>", "<task>")
    comment: str | None  # the `/imm …` line for the initiative issue, when there is one

    def local(self, program: str, repo: Path, executor: str | None = None) -> str:
        """The command to paste; `executor`: the `--executor` the person ran with, kept on
        the commands that run lanes (else pasting one runs the config's executor)."""
        args = [*self.args, "--repo", str(repo)]
        if executor and self.args[0] == "run":
            args += ["--executor", executor]
        return f"{program} {shlex.join(args)}"


MAX_RETRY_COMMANDS = 3


def next_commands(report: BatchRunReport, idle: bool = False) -> list[NextCommand]:
    """The exact commands for a batch that stopped (none while it runs or once it completed);
    `idle`: a running batch no process works on (its `imm run` was interrupted) resumes."""
    slug = report.initiative_slug
    resume = NextCommand(("run", slug), "/imm run")
    fresh = NextCommand(("run", slug, "--fresh"), None)
    match report.batch_state:
        case BatchState.NEEDS_HUMAN:
            # a retry as it is cannot pass tests its lane may not change (issue 62 #3)
            parked = [
                c.task_id for c in report.children
                if c.state is ChildState.NEEDS_HUMAN and not c.failing_outside_scope
            ]  # fmt: skip
            retries = [
                NextCommand(("retry", slug, task), f"/imm retry {task}")
                for task in parked[:MAX_RETRY_COMMANDS]
            ]
            return [resume, *retries]
        case BatchState.BUDGET_STOPPED:
            return [resume]
        case BatchState.CANCELLED:
            return [resume, fresh]
        case BatchState.FAILED | BatchState.REJECTED:
            return [fresh]
        case BatchState.RUNNING if idle or not any(c.state.in_flight for c in report.children):
            return [resume]  # nothing runs it (`imm retry` sent a task back): start it
        case BatchState.PREPARED | BatchState.RUNNING | BatchState.COMPLETED:
            return []


def local_commands(
    report: BatchRunReport,
    program: str,
    repo: Path,
    executor: str | None = None,
    idle: bool = False,
) -> list[str]:
    return [command.local(program, repo, executor) for command in next_commands(report, idle)]


def comment_commands(report: BatchRunReport) -> list[str]:
    return [command.comment for command in next_commands(report) if command.comment]


def batch_text(
    report: BatchRunReport,
    *,
    program: str = "imm",
    repo: Path | None = None,
    executor: str | None = None,
    full: Path | None = None,
    idle: bool = False,
) -> str:
    """`imm status`'s text and `imm run`'s closing summary: state and why, one line per task
    with its attempts, the failed commands under their task (folded to their causes; `full`:
    the file that holds them all), and what to run next."""
    lines = [f"{report.batch_id}: {report.batch_state} — {report.reason}"]
    if report.continues is not None:
        lines.append(continuation_line(report.continues))
    width = max((len(child.task_id) for child in report.children), default=0)
    costs = {task: f"{cell:>9}  " for task, cell in cost_cells(report).items()}
    for child in report.children:
        detail = child.commit[:12] if child.commit else (child.reason or "")
        tries, cost = _tries(child), costs.get(child.task_id, "")
        lines.append(
            f"  {child.task_id:<{width}}  {child.state:<15}  {cost}{detail}{tries}".rstrip()
        )
        lines.extend(folded_failures(child.failures, " " * (width + 4)))
    lines.extend([report.cost] if report.cost else [])
    lines.extend(report.unconfined)
    lines.extend(report.branch_checks)
    lines.extend(folded_failures(report.branch_failures, "  "))
    lines.extend(report.adopted)
    lines.extend(report.quarantined)
    lines.extend(report.retired)
    lines.extend(report.flaky)
    if full is not None:
        lines.append(f"every failure in full: {full}")
    commands = local_commands(report, program, repo, executor, idle) if repo is not None else []
    lines.append(f"next: {report.next_action}" + (":" if commands else ""))
    lines.extend(f"  {command}" for command in commands)
    if report.batch_state is BatchState.COMPLETED and repo is not None:
        again = NextCommand(("run", report.initiative_slug, "--fresh"), None)
        lines.append("or run every task again from the base branch (the branch is archived):")
        lines.append(f"  {again.local(program, repo, executor)}")
    return "\n".join(lines)


def _tries(child: ReportChild) -> str:
    """`(passed on attempt 2)` when the QA loop retried a task; lost lanes counted apart."""
    parts = []
    if child.qa_failures and child.state.done:
        parts.append(f"passed on attempt {child.qa_failures + 1}")
    elif child.qa_failures:
        parts.append(f"failed its checks on {plural(child.qa_failures, 'attempt')}")
    if child.attempts:
        parts.append(plural(child.attempts, "lost lane"))
    return f"  ({'; '.join(parts)})" if parts else ""


# -- on GitHub: the status comment and the job summary ---------------------------------------
STATE_ICONS: Mapping[str, str] = {
    "pending": "⏳", "lane_admitted": "🏃", "settled": "🏃", "lane_committed": "📦",
    "integrated": "✅", "released": "✅", "needs_human": "🛑", "skipped_blocked": "⏭️",
}  # fmt: skip


def github_batch_markdown(report: BatchRunReport, state: BatchRunState, repository_url: str) -> str:
    """A batch as GitHub shows it — the status comment (under its marker) and every job
    summary: state, the task table with commit links, the failed commands in collapsed
    `<details>`, the `/imm` commands that get it moving, and the DAG coloured by state."""
    rows = []
    costs = cost_cells(report)
    for child in report.children:
        commit = (
            f"[`{child.commit[:12]}`]({repository_url}/commit/{child.commit})"
            if child.commit
            else "—"
        )
        lane = f"`{child.lane_branch}`" if child.lane_branch else "—"
        icon = STATE_ICONS.get(str(child.state), "")
        rows.append(
            f"| {icon} `{child.task_id}` | {child.state} | {lane} | {cell(child.reason)} "
            f"| {commit} |{_cost_cell(costs, child)}"
        )
    done = sum(1 for child in report.children if child.state.done)
    return "\n".join(
        [
            f"## imm: `{report.initiative_slug}` is {report.batch_state}",
            "",
            f"{done} of {plural(len(report.children), 'task')} integrated into "
            f"`{state.branch}` · batch `{report.batch_id}` · "
            f"{plural(report.lanes_started, 'lane')} started",
            *_verification(state),
            *batch_body(report, state, rows, comment_commands(report)),
        ]
    )


def _verification(state: BatchRunState) -> list[str]:
    """What the verify jobs are doing, a line per round (two overlap in pipelined rounds)."""
    rounds = state.verify_rounds
    if len(rounds) == 1:
        return ["", f"Verification: {shard_line(rounds[0])}."]
    return (
        ["", *(f"Verification (run {r.run_id}): {shard_line(r)}." for r in rounds)]
        if rounds
        else []
    )


def job_summary(report: BatchRunReport, state: BatchRunState, repository_url: str) -> str:
    """The job summary (`$GITHUB_STEP_SUMMARY`) of a plan, lane or integrate job."""
    return github_batch_markdown(report, state, repository_url)


def continuation_line(continues: Continuation) -> str:
    """`continues batch-…: 3 tasks already integrated, plan changed: b, c`."""
    parts = [f"{plural(len(continues.kept), 'task')} already integrated"]
    if continues.changed:
        parts.append(f"plan changed: {', '.join(continues.changed)}")
    if continues.merged_base:
        parts.append(f"base merged in at {continues.merged_base[:12]}")
    return f"continues {continues.batch_id}: {', '.join(parts)}"
