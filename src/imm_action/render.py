"""Text renderings for people (pure): plans and batches as Markdown tables and a Mermaid DAG,
failed commands, and the next commands to paste. Every place that shows a batch — `imm
status`, `imm run`'s summary and live view, the status comment, the job summary — renders
through here, so they say the same thing."""

from __future__ import annotations

import html
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from imm_action.costs import cost_cell
from imm_action.model.outcome import Failure
from imm_action.model.plan import BatchPlan
from imm_action.model.report import BatchRunReport, ReportChild
from imm_action.model.shard import shard_line
from imm_action.model.state import BatchRunState, BatchState, ChildState, Continuation
from imm_action.text import plural

# Node colours by status; the same palette serves plan and batch views.
STATUS_STYLES: Mapping[str, str] = {
    "enrollable": "fill:#ddf4ff,stroke:#0969da",
    "already_settled": "fill:#dafbe1,stroke:#1a7f37",
    "blocked": "fill:#fff8c5,stroke:#9a6700",
    "needs_human": "fill:#ffebe9,stroke:#cf222e",
}


def direct_dependencies(closures: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The transitive reduction of closure sets: the edges a person wants to see."""
    direct: dict[str, list[str]] = {}
    for task, closure in closures.items():
        implied: set[str] = set()
        for need in closure:
            implied.update(closures.get(need, ()))
        direct[task] = [need for need in closure if need not in implied]
    return direct


def mermaid_dag(
    order: Sequence[str],
    closures: Mapping[str, Sequence[str]],
    status: Mapping[str, str],
    groups: Sequence[Sequence[str]],
    styles: Mapping[str, str] = STATUS_STYLES,
    *,
    notes: Mapping[str, str] | None = None,
) -> str:
    """`notes`: a second line under a task's name (what its agents cost)."""
    node = {task: f"t{index}" for index, task in enumerate(order)}
    label = {task: f"{task}<br/>{notes[task]}" if notes and task in notes else task
             for task in order}  # fmt: skip
    lines = ["flowchart TD"]
    grouped: set[str] = set()
    for number, group in enumerate(groups, start=1):
        lines.append(f'  subgraph g{number}["parallel group {number}"]')
        lines.extend(f'    {node[task]}["{label[task]}"]' for task in group)
        lines.append("  end")
        grouped.update(group)
    lines.extend(f'  {node[task]}["{label[task]}"]' for task in order if task not in grouped)
    for task, needs in direct_dependencies(closures).items():
        lines.extend(f"  {node[need]} --> {node[task]}" for need in needs)
    used = sorted({status[task] for task in order})
    lines.extend(f"  classDef {name} {styles[name]}" for name in used if name in styles)
    for name in used:
        members = ",".join(node[task] for task in order if status[task] == name)
        lines.append(f"  class {members} {name}")
    return "\n".join(lines)


def plan_markdown(plan: BatchPlan, gate: Sequence[str] = ()) -> str:
    """The plan for a person; `gate`: what gates every move (`passes.gate.gate_markdown`)."""
    closures = {child.task_id: child.blocked_by for child in plan.children}
    status = {child.task_id: child.status for child in plan.children}
    group_of = {
        task: str(number)
        for number, group in enumerate(plan.parallel_groups, start=1)
        for task in group
    }
    rows = [
        f"| `{child.task_id}` | `{child.slice_id}` | {child.status} | {_cell(child.reason)} "
        f"| {group_of.get(child.task_id, '—')} | {_cell(', '.join(child.blocked_by))} |"
        for child in plan.children
    ]
    parts = [
        f"# Plan for `{plan.initiative}`",
        "",
        f"{len(plan.enrollable)} of {plural(len(plan.children), 'task')} enrollable · "
        f"{plural(len(plan.parallel_groups), 'parallel group')} · "
        f"max_parallel {plan.max_parallel} · "
        f"budget {plural(plan.budget.max_children, 'child', 'children')}, "
        f"{plural(plan.budget.qa_failure_limit, 'QA failure')} · digest `{plan.plan_digest}`",
        "",
        "| task | slice | status | reason | group | blocked by |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if plan.scope_conflicts:
        parts += ["## Scope conflicts", "", "| task | waits for overlapping |", "|---|---|"]
        parts += [
            f"| `{conflict.task_id}` | {', '.join(f'`{t}`' for t in conflict.overlaps_with)} |"
            for conflict in plan.scope_conflicts
        ]
        parts.append("")
    parts += [
        *gate,
        "## Dependency graph",
        "",
        "```mermaid",
        mermaid_dag(plan.order, closures, status, plan.parallel_groups),
        "```",
        "",
    ]
    return "\n".join(parts)


def _cell(text: str | None) -> str:
    if not text:
        return "—"
    return text.replace("|", "\\|").replace("\n", " ")


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
        f"| `{child.task_id}` | {child.state} | {_cell(child.lane_branch)} | {_cell(child.reason)} "
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
        f"**Why:** {report.reason}",
        "",
        f"**Next:** {report.next_action}",
        *paste,
        *(["", f"**Cost:** {report.cost}"] if report.cost else []),
        "",
        "| task | state | lane | reason | commit |" + (" cost |" if costs else ""),
        "|---|---|---|---|---|" + ("---|" if costs else ""),
        *rows,
        "",
        *adopted_markdown(report),
        *failures_markdown(report.children),
        *failure_details(state.branch, report.branch_failures),
        "```mermaid",
        mermaid_dag(order, closures, status, [], BATCH_STYLES, notes=costs),
        "```",
        "",
    ]


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
    return [*(f"- {line}" for line in lines), ""] if lines else []


def _seconds(value: float) -> str:
    return f"{value:g}"


# -- failed commands (SPEC §5.7) -----------------------------------------------------------------
def failure_ending(failure: Failure) -> str:
    """How the command ended, in words: `exited with 1`, `timed out after 2 s`, …"""
    if failure.error:
        return f"could not run: {failure.error}"
    if failure.timeout_s is not None:
        return f"timed out after {_seconds(failure.timeout_s)} s"
    if failure.output_limited:
        return "was stopped: its output passed its limit"
    if failure.changed_outside:
        return f"changed files outside its writable paths: {', '.join(failure.changed_outside)}"
    if failure.exit_code is None:
        return "ended without an exit status"
    return f"exited with {failure.exit_code}"


def failure_headline(failure: Failure) -> str:
    return f"{failure.step}: `{failure.command}` {failure_ending(failure)}"


def failure_text(failure: Failure, indent: str = "", most: int | None = None) -> str:
    """The plain-text form: the headline, then the output's last lines (`most` of them, when
    space is short), each behind `| `. The lane log, the live view, `imm status` and the
    executor's retry prompt all use it."""
    output = failure.output_tail.splitlines()
    if most is not None:
        output = output[-most:] if most > 0 else []
    return "\n".join([f"{indent}{failure_headline(failure)}", *_output_lines(output, indent)])


def _output_lines(output: Sequence[str], indent: str, whose: str = "its output") -> list[str]:
    """The last lines of a command's output, behind `| `, under a line saying whose."""
    if not output:
        return [f"{indent}  (no output)"]
    return [
        f"{indent}  last {plural(len(output), 'line')} of {whose}:",
        *(f"{indent}  | {line}".rstrip() for line in output),
    ]


STATUS_FAILURE_LINES = 12  # of one output shown by `imm status` and `imm run`'s report


def folded_failures(
    failures: Sequence[Failure], indent: str = "", most: int = STATUS_FAILURE_LINES
) -> list[str]:
    """A task's failed commands led by the cause: each command's headline, and each distinct
    error's output once — the last `most` lines — however many commands ended with it (seven
    checks failing on the same ImportError show it once, with the count). Commands are told
    apart by the error their output ends with (`error_signature`)."""
    groups: dict[str, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(error_signature(failure.output_tail), []).append(failure)
    lines: list[str] = []
    for members in groups.values():
        lines.extend(f"{indent}{failure_headline(failure)}" for failure in members)
        if most <= 0:  # the headlines alone: the output is shown elsewhere
            continue
        whose = (
            "its output"
            if len(members) == 1
            else f"the output of {members[0].step} (the same error in {len(members)} commands)"
        )
        lines.extend(_output_lines(members[0].output_tail.splitlines()[-most:], indent, whose))
    return lines


_ERROR_LINE = re.compile(r"^E\s+\S|\b\w*(?:Error|Exception)\b.*:")
_FOLDERS = re.compile(r"(?:/[^/\s'\"()]+)+/")
_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def error_signature(output: str) -> str:
    """What tells one error from another in a command's output: its last error line (pytest's
    `E   ...`, a Python exception), else its last line; folders and numbers left out, so the
    same error met in two checkouts, in 0.05 s and in 0.07 s, is the same."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    last = errors[-1] if errors else (lines[-1] if lines else "")
    return _NUMBERS.sub("N", _FOLDERS.sub("", last))


def failures_markdown(children: Iterable[ReportChild]) -> list[str]:
    """One collapsed `<details>` per failed command of every child that shows one: the status
    comment, `imm status --format markdown` and the job summaries render failures with this."""
    parts: list[str] = []
    for child in children:
        parts.extend(failure_details(child.task_id, child.failures))
    return parts


def failure_details(task_id: str, failures: Iterable[Failure]) -> list[str]:
    """A task's failed commands as collapsed `<details>` blocks (Markdown lines)."""
    parts: list[str] = []
    for failure in failures:
        summary = (
            f"<code>{html.escape(task_id)}</code> · {html.escape(failure.step)}: "
            f"<code>{html.escape(failure.command)}</code> "
            f"{html.escape(failure_ending(failure))}"
        )
        fence = code_fence(failure.output_tail)
        parts += [
            f"<details><summary>{summary}</summary>",
            "",
            f"{fence}text",
            failure.output_tail or "(no output)",
            fence,
            "",
            "</details>",
            "",
        ]
    return parts


def code_fence(text: str) -> str:
    """A code fence longer than any backtick run inside the text, so output cannot end it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


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
            parked = [c.task_id for c in report.children if c.state is ChildState.NEEDS_HUMAN]
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
            f"| {icon} `{child.task_id}` | {child.state} | {lane} | {_cell(child.reason)} "
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
            *(["", f"Verification: {shard_line(state.verifying)}."] if state.verifying else []),
            *batch_body(report, state, rows, comment_commands(report)),
        ]
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
