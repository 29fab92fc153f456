"""`imm status [<slug>|--batch-id ID]`: the batch report from the state refs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from imm_action.batches.output import no_process_at_work, print_report
from imm_action.batches.repo import (
    BatchRepo,
    base_of,
    config_warning_lines,
    executor_to_print,
    logs_folder,
    open_batch_repo,
)
from imm_action.errors import EXIT_OK, UsageError
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.model.state import BatchRunState, BatchState, ChildState
from imm_action.ports import Ports
from imm_action.text import listed, plural


@dataclass(frozen=True)
class StatusArgs:
    slug: str | None
    repo: Path
    batch_id: str | None
    remote: str | None
    format: str


def run(args: StatusArgs, ports: Ports) -> int:
    io, initiatives = ports.io, ports.initiatives
    batch_repo = open_batch_repo(args.repo, args.remote, initiatives)
    for line in config_warning_lines(batch_repo):
        io.warn(line)
    batch_repo.refs.refresh()
    stored = find_batch(StateStore(batch_repo.refs), args.slug, args.batch_id)
    idle = no_process_at_work(stored.state)
    print_report(
        as_it_stands(batch_repo, stored, idle), args.format, io, batch_repo.root,
        executor_to_print(batch_repo, stored.state.initiative_slug),
        logs=logs_folder(batch_repo), idle=idle,
    )  # fmt: skip
    return EXIT_OK


def as_it_stands(batch_repo: BatchRepo, stored: StoredBatch, idle: bool = False) -> StoredBatch:
    """The stored report, with a next action that is still true: a completed batch whose
    branch was merged since asks nobody to merge it; a running one no process works on asks
    nobody to wait for it."""
    state, report = stored.state, stored.report
    if report is not None and idle:
        resume = "no process is at work on it (its run ended); resume it"
        update = {"reason": at_rest(state), "next_action": resume}
        return replace(stored, report=report.model_copy(update=update))
    if report is None or state.batch_state is not BatchState.COMPLETED or not state.commits:
        return stored
    base_ref, base_head = base_of(batch_repo)
    if not batch_repo.repo.is_ancestor(state.commits[-1], base_head):
        return stored
    done = report.model_copy(
        update={
            "next_action": f"{state.branch} is merged into {base_ref}; nothing is left to do "
            f"(new tasks of {state.initiative_slug} start a new batch)"
        }
    )
    return replace(stored, report=done)


def at_rest(state: BatchRunState) -> str:
    """A running batch whose run ended (Ctrl-C, a crash), told as one story (issue 62 #4: the
    headline said "1 lane in flight" above "no process is at work on it")."""
    done = sum(1 for child in state.children if child.state.done)
    stopped = [c.task_id for c in state.children if c.state is ChildState.LANE_ADMITTED]
    waiting = [c.task_id for c in state.children
               if c.state in (ChildState.SETTLED, ChildState.LANE_COMMITTED)]  # fmt: skip
    parts = [f"{done} of {plural(len(state.children), 'task')} integrated"]
    if waiting:
        parts.append(f"{listed(waiting)} committed, waiting to be integrated")
    if stopped:
        parts.append(f"{listed(stopped)} stopped at work when the run ended (to run again)")
    return "; ".join([*parts, "no process is at work on it"])


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
