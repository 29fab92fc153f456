"""A batch's report as a command prints it, and the exit code its state maps to (SPEC §6)."""

from __future__ import annotations

from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, ImmError
from imm_action.integrate.store import StoredBatch
from imm_action.model.common import canonical_model_text
from imm_action.model.state import BatchState
from imm_action.render import batch_markdown


def print_report(stored: StoredBatch, fmt: str, io: CommandIO) -> None:
    report, state = stored.report, stored.state
    if report is None:
        raise ImmError(f"batch {state.batch_id} has no report at {stored.commit[:12]}")
    if fmt == "json":
        io.out.write(canonical_model_text(report))
    elif fmt == "markdown":
        io.say(batch_markdown(report, state))
    else:
        io.say(f"{report.batch_id}: {report.batch_state} — {report.reason}")
        for child in report.children:
            detail = child.commit[:12] if child.commit else (child.reason or "")
            io.say(f"  {child.task_id:<24} {child.state:<16} {detail}")
        io.say(f"next: {report.next_action}")


def exit_code_for(state: BatchState) -> int:
    if state in (BatchState.RUNNING, BatchState.PREPARED, BatchState.COMPLETED):
        return EXIT_OK
    return EXIT_NEEDS_HUMAN
