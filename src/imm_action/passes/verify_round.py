"""A round's checks fanned out to verify jobs (issue 32, decision 0054): what the integrate job
takes from their verdicts, and what the stack and bisect jobs record as shards for them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from imm_action.integrate.shards import (
    VERIFY_LOSS_LIMIT,
    accept_verdicts,
    add_stage,
    plan_shards,
)
from imm_action.model.shard import shard_line
from imm_action.model.state import BatchRunState
from imm_action.passes.observe import ObservedStack
from imm_action.passes.request import FanOut, PassRequest
from imm_action.text import plural
from imm_action.verify.result_cache import ResultCache


@dataclass(frozen=True)
class VerdictsTaken:
    state: BatchRunState
    verify: bool = True  # False: the pass runs no check (verify jobs owe the stack)
    taken: int | None = None  # results taken from verify jobs' verdicts, when there were any


def take_verdicts(
    state: BatchRunState, request: PassRequest, results: ResultCache, log: Callable[[str], None]
) -> VerdictsTaken:
    """The integrate job: the round's verdicts go into the result cache, and the pass
    verifies what is still owed itself — unless a verify job left a shard without a
    verdict: then nothing unverified lands, and the next round's verify jobs run it again
    (a shard's checks are never counted passed), up to VERIFY_LOSS_LIMIT rounds."""
    fanned = state.verifying
    if fanned is None:
        return VerdictsTaken(state)
    if request.verdicts is None:
        # another job of the workflow (the next round's plan job, say): a stack verify
        # jobs are at work on, or whose verify jobs lost a shard, is left to them (the
        # next round's stack job records what it still owes)
        return VerdictsTaken(state, verify=not request.verify_jobs)
    given = request.verdicts
    files = given.files if given.run_id == fanned.run_id else {}
    accepted = accept_verdicts(state.batch_id, fanned, files)
    for (tree, digest), result in accepted.results.items():
        results.put(tree, digest, result)
    taken = len(accepted.results)
    for why in accepted.refused:
        log(f"verdict refused: {why}")
    log(
        f"took {plural(taken, 'verdict')} of "
        f"{plural(len(fanned.shards), 'verify job')} (run {fanned.run_id})"
    )
    if request.fan_out is not None:
        # the bisect job: what is owed still goes to this run's next stage of verify jobs
        return VerdictsTaken(state, taken=taken)
    if accepted.complete:
        return VerdictsTaken(state.model_copy(update={"verifying": None}), taken=taken)
    losses = fanned.losses + 1
    missing = ", ".join(str(index) for index in accepted.missing)
    if losses >= VERIFY_LOSS_LIMIT:
        log(
            f"verify jobs left shard {missing} without a verdict {losses} times: "
            "this runner verifies what they owed"
        )
        return VerdictsTaken(state.model_copy(update={"verifying": None}), taken=taken)
    log(
        f"verify jobs left shard {missing} without a verdict: its checks are not passed; "
        f"the stack waits for the next round's verify jobs ({losses} of "
        f"{VERIFY_LOSS_LIMIT - 1} such rounds)"
    )
    lost = fanned.model_copy(update={"losses": losses})
    return VerdictsTaken(state.model_copy(update={"verifying": lost}), verify=False, taken=taken)


def fanned_out(
    state: BatchRunState,
    fan_out: FanOut,
    observed: ObservedStack | None,
    unverified: Sequence[str],
    log: Callable[[str], None],
) -> BatchRunState:
    """The stack job (stage 1) and the bisect job (stage 2): what the stack owes, as shards
    for this run's verify jobs when running it here would take longer than the rules
    allow. Nothing owed by a stack this run began to verify: its round stays for the
    integrate job (it holds the verdicts so far); else none (the integrate job verifies)."""
    earlier = state.verifying
    this_run = earlier if earlier is not None and earlier.run_id == fan_out.run_id else None
    if observed is None or observed.top is None or not unverified:
        return state.model_copy(update={"verifying": None})
    shards = plan_shards(observed.owed, fan_out.rules)
    if this_run is not None and (not shards or this_run.stage > 1):
        return state  # nothing more to fan out in this run
    if not shards:
        return state.model_copy(update={"verifying": None})
    losses = earlier.losses if earlier is not None else 0
    fanned = add_stage(this_run, shards, observed.top, fan_out.run_id, losses)
    log(shard_line(fanned))
    return state.model_copy(update={"verifying": fanned})
