"""A batch's report as a command prints it, and the exit code its state maps to (SPEC §6)."""

from __future__ import annotations

from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, ImmError
from imm_action.integrate.store import StoredBatch
from imm_action.model.common import canonical_model_text
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, BatchState, ChildState, LocalRunner
from imm_action.render import batch_markdown, batch_text, local_commands
from imm_action.render.failures import failure_text
from imm_action.sandbox.leftovers import pid_alive


def print_report(
    stored: StoredBatch,
    fmt: str,
    io: CommandIO,
    repo: Path,
    executor: str | None = None,
    *,
    logs: Path | None = None,
    idle: bool = False,
) -> None:
    """The report for a person at this repository: commands are written to run as printed
    (with the `--executor` the person gave, when they gave one). The text folds each task's
    failures to their causes; every failure in full goes to a file under `logs`, which the text
    names. `idle`: the batch runs, but no process works on it (`no_process_at_work`)."""
    report, state = stored.report, stored.state
    if report is None:
        raise ImmError(f"batch {state.batch_id} has no report at {stored.commit[:12]}")
    if fmt == "json":
        io.out.write(canonical_model_text(report))
    elif fmt == "markdown":
        commands = local_commands(report, io.program, repo, executor, idle)
        io.say(batch_markdown(report, state, commands))
    else:
        full = _failures_log(report, logs) if logs is not None else None
        io.say(
            batch_text(
                report, program=io.program, repo=repo, executor=executor, full=full, idle=idle
            )
        )


def _failures_log(report: BatchRunReport, logs: Path) -> Path | None:
    """Every failed command of the batch with all the output kept of it, in one file, and
    every task parked without one (a guard's refusal: out of scope, a check's path touched)."""
    failed = [
        child
        for child in report.children
        if child.failures or (child.state is ChildState.NEEDS_HUMAN and child.reason)
    ]
    if not failed:
        return None
    text = "\n\n".join(
        f"task {child.task_id}: {child.reason}"
        + "".join("\n" + failure_text(failure, "  ") for failure in child.failures)
        for child in failed
    )
    path = logs / f"{report.batch_id}.failures.log"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    except OSError:
        return None  # a read-only repository: the report is shown all the same
    return path


def no_process_at_work(state: BatchRunState) -> bool:
    """A running local batch whose lanes in flight no live `imm run` owns (each runner names
    its coordinator's pid): Ctrl-C or a crash ended the run; `imm run` resumes it."""
    in_flight = [child for child in state.children if child.state.in_flight]
    if state.batch_state is not BatchState.RUNNING or not in_flight:
        return False
    runners = [child.lane.runner if child.lane else None for child in in_flight]
    return all(
        isinstance(runner, LocalRunner) and (runner.pid is None or not pid_alive(runner.pid))
        for runner in runners
    )


def exit_code_for(state: BatchState) -> int:
    if state in (BatchState.RUNNING, BatchState.PREPARED, BatchState.COMPLETED):
        return EXIT_OK
    return EXIT_NEEDS_HUMAN
