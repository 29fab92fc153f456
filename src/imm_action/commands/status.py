"""`imm status [<slug>|--batch-id ID]`: the batch report from the state refs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imm_action.commands.batch import open_batch_repo
from imm_action.commands.io import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, UsageError
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.model.common import canonical_model_text
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, BatchState
from imm_action.render import batch_markdown


@dataclass(frozen=True)
class StatusArgs:
    slug: str | None
    repo: Path
    batch_id: str | None
    remote: str | None
    format: str


def run(args: StatusArgs, io: CommandIO) -> int:
    batch_repo = open_batch_repo(args.repo, args.remote)
    batch_repo.refs.refresh()
    stored = find_batch(StateStore(batch_repo.refs), args.slug, args.batch_id)
    assert stored.report is not None
    print_report(stored.report, stored.state, args.format, io)
    return EXIT_OK


def find_batch(store: StateStore, slug: str | None, batch_id: str | None) -> StoredBatch:
    if batch_id is not None:
        found = store.load(batch_id)
        if found is None:
            raise UsageError(f"no batch {batch_id}")
        return found
    if slug is None:
        everything = store.all_batches()
        if not everything:
            raise UsageError("no batch in this repository")
        return everything[-1]
    batches = store.batches_of(slug)
    if not batches:
        raise UsageError(f"no batch for {slug}")
    return store.active(slug) or batches[-1]


def print_report(report: BatchRunReport, state: BatchRunState, fmt: str, io: CommandIO) -> None:
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
