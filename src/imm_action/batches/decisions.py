"""A person's decision (retry, cancel) applied to the active batch through one reconcile pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from imm_action.batches.output import print_report
from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.batches.repo import (
    check_place,
    executor_to_print,
    open_batch_repo,
    setup_commit,
)
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO
from imm_action.errors import EXIT_OK, UsageError
from imm_action.integrate import transitions
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.transitions import TransitionError
from imm_action.model.state import BatchRunState
from imm_action.passes.driver import reconcile


@dataclass(frozen=True)
class DecisionArgs:
    """Where a person's decision goes: which batch of which initiative, in which repository."""

    slug: str
    repo: Path
    batch_id: str | None
    remote: str | None
    path_env: str


def retry_decision(task_id: str) -> Callable[[BatchRunState], BatchRunState]:
    return partial(_retry, task_id=task_id)


def _retry(state: BatchRunState, task_id: str) -> BatchRunState:
    try:
        return transitions.retry(state, task_id)
    except TransitionError as refused:
        raise UsageError(str(refused)) from None


def apply_decision(
    args: DecisionArgs,
    decision: Callable[[BatchRunState], BatchRunState],
    io: CommandIO,
    initiatives: InitiativeSource,
    retry: str | None = None,
) -> int:
    """Apply a person's decision to the active batch through a reconcile pass (one CAS). A
    retry of a task of a stopped batch whose plan changed (a fix was committed) continues the
    batch instead, with that task and the dependents it skipped pending again (SPEC §5.7)."""
    batch_repo = open_batch_repo(args.repo, args.remote, initiatives)
    stopped = Stopped.RESUME if retry is None else Stopped.CONTINUE_IF_PLAN_CHANGED
    request = pass_request(
        batch_repo, args.slug, batch_id=args.batch_id, admit=False, start=False,
        stopped=stopped, retry=retry,
    )  # fmt: skip

    def log(line: str) -> None:
        io.warn(f"imm: {line}")

    place = check_place(batch_repo, args.path_env, log, holds_token=args.remote is not None,
                        setup_at=setup_commit(batch_repo, args.slug))  # fmt: skip
    ports = pass_ports(batch_repo, log, path_env=args.path_env, place=place)
    try:
        result = reconcile(replace(request, mutate=decision), ports)
    finally:
        place.close()
    executor = executor_to_print(batch_repo, args.slug) if args.remote is None else None
    print_report(result.stored, "text", io, batch_repo.root, executor)
    return EXIT_OK
