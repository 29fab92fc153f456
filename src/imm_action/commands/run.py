"""`imm run <slug>`: run the whole batch here, with worktree lanes and live progress."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from imm_action.batches.output import print_report
from imm_action.batches.repo import open_batch_repo
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO
from imm_action.errors import EXIT_INTERRUPTED, EXIT_NEEDS_HUMAN, EXIT_OK, ImmError, UsageError
from imm_action.integrate.store import StateStore
from imm_action.local.coordinator import Coordinator, RunOptions
from imm_action.local.progress import LiveProgress, PlainProgress
from imm_action.model.state import BatchState
from imm_action.render import NextCommand


@dataclass(frozen=True)
class RunArgs:
    slug: str
    repo: Path
    max_parallel: int | None
    executor: str | None
    batch_id: str | None
    json: bool
    environment: Mapping[str, str]


def run(args: RunArgs, io: CommandIO, initiatives: InitiativeSource) -> int:
    batch_repo = open_batch_repo(args.repo, None, initiatives)
    executor = args.executor or batch_repo.config.executor
    if not executor:
        raise UsageError("no executor: pass --executor CMD or set executor in .github/imm.yml")
    options = RunOptions(args.slug, executor, args.max_parallel, args.batch_id, args.environment)
    live = io.err.isatty() and not args.json
    progress = LiveProgress(io.err) if live else PlainProgress(io.err)
    coordinator = Coordinator(batch_repo, options, progress)
    try:
        state = coordinator.run()
    except KeyboardInterrupt:
        coordinator.interrupt()
        progress.close(coordinator.view)
        again = NextCommand(("run", args.slug), None).local(io.program, batch_repo.root)
        io.warn(f"imm run: interrupted; the batch is saved — resume it with: {again}")
        return EXIT_INTERRUPTED
    progress.close(coordinator.view)
    stored = StateStore(batch_repo.refs).load(state.batch_id)
    if stored is None:
        raise ImmError(f"batch {state.batch_id} has no state ref after the run")
    print_report(stored, "json" if args.json else "text", io, batch_repo.root)
    return EXIT_OK if stored.state.batch_state is BatchState.COMPLETED else EXIT_NEEDS_HUMAN
