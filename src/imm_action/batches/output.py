"""A batch's report as a command prints it, and the exit code its state maps to (SPEC §6)."""

from __future__ import annotations

from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, ImmError
from imm_action.integrate.store import StoredBatch
from imm_action.model.common import canonical_model_text
from imm_action.model.state import BatchState
from imm_action.render import batch_markdown, batch_text, local_commands


def print_report(
    stored: StoredBatch, fmt: str, io: CommandIO, repo: Path, executor: str | None = None
) -> None:
    """The report for a person at this repository: commands are written to run as printed
    (with the `--executor` the person gave, when they gave one)."""
    report, state = stored.report, stored.state
    if report is None:
        raise ImmError(f"batch {state.batch_id} has no report at {stored.commit[:12]}")
    if fmt == "json":
        io.out.write(canonical_model_text(report))
    elif fmt == "markdown":
        io.say(batch_markdown(report, state, local_commands(report, io.program, repo, executor)))
    else:
        io.say(batch_text(report, program=io.program, repo=repo, executor=executor))


def exit_code_for(state: BatchState) -> int:
    if state in (BatchState.RUNNING, BatchState.PREPARED, BatchState.COMPLETED):
        return EXIT_OK
    return EXIT_NEEDS_HUMAN
