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
from imm_action.model.shard import VerifyRound, shard_line
from imm_action.model.state import MAX_EARLIER_ROUNDS, BatchChild, BatchRunState, GithubRunner
from imm_action.passes.observe import ObservedStack
from imm_action.passes.request import FanOut, PassRequest, RoundAlive, no_other_run
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
    (a shard's checks are never counted passed), up to VERIFY_LOSS_LIMIT rounds. A run
    whose stack another run's round verifies (pipelined rounds, ADR 0075) runs no check
    either: it lands what the results judge, and leaves the rest to that run."""
    rounds = state.verify_rounds
    if not rounds:
        return VerdictsTaken(state)
    if request.verdicts is None:
        # another job of the workflow (the next round's plan job, say): a stack verify
        # jobs are at work on, or whose verify jobs lost a shard, is left to them (the
        # next round's stack job records what it still owes)
        return VerdictsTaken(state, verify=not request.verify_jobs)
    given = request.verdicts
    fanned = state.round_of(given.run_id)
    files = given.files
    if fanned is None:
        others = alive_elsewhere(state, given.run_id, request.round_alive)
        ended = [r for r in rounds if r not in others]  # their runs ended before taking them
        if not ended:
            return VerdictsTaken(state, verify=False)
        fanned, files = ended[-1], {}
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
    rest = [r for r in rounds if r is not fanned]
    if accepted.complete:
        return VerdictsTaken(with_rounds(state, rest), taken=taken)
    losses = fanned.losses + 1
    missing = ", ".join(str(index) for index in accepted.missing)
    if losses >= VERIFY_LOSS_LIMIT:
        log(
            f"verify jobs left shard {missing} without a verdict {losses} times: "
            "this runner verifies what they owed"
        )
        return VerdictsTaken(with_rounds(state, rest), taken=taken)
    log(
        f"verify jobs left shard {missing} without a verdict: its checks are not passed; "
        f"the stack waits for the next round's verify jobs ({losses} of "
        f"{VERIFY_LOSS_LIMIT - 1} such rounds)"
    )
    lost = fanned.model_copy(update={"losses": losses})
    kept = [lost if r is fanned else r for r in rounds]
    return VerdictsTaken(with_rounds(state, kept), verify=False, taken=taken)


def fanned_out(
    state: BatchRunState,
    fan_out: FanOut,
    observed: ObservedStack | None,
    unverified: Sequence[str],
    log: Callable[[str], None],
    *,
    round_alive: RoundAlive = no_other_run,
) -> BatchRunState:
    """The stack job (stage 1) and the bisect job (stage 2): what the stack owes, as shards
    for this run's verify jobs when running it here would take longer than the rules
    allow. Nothing owed by a stack this run began to verify: its round stays for the
    integrate job (it holds the verdicts so far); else none (the integrate job verifies).
    Rounds of other runs still in progress stay beside it (pipelined rounds, ADR 0075), and
    what they owe is not owed twice; a round whose run ended untaken is taken over."""
    run_id = fan_out.run_id
    rounds = state.verify_rounds
    this_run = state.round_of(run_id)
    others = alive_elsewhere(state, run_id, round_alive)
    if observed is None or observed.top is None or not unverified:
        return with_rounds(state, others)
    covered = {(c.tree, c.descriptor_digest) for r in others for s in r.shards for c in s.checks}
    owed = [c for c in observed.owed if (c.tree, c.descriptor_digest) not in covered]
    shards = plan_shards(owed, fan_out.rules)
    if this_run is not None and (not shards or this_run.stage > 1):
        return state  # nothing more to fan out in this run
    if not shards:
        return with_rounds(state, others)
    # a round taken over keeps its losses (this run's own keeps its own in add_stage)
    ended = [r for r in rounds if r is not this_run and r not in others]
    fanned = add_stage(this_run, shards, observed.top, run_id, ended[-1].losses if ended else 0)
    log(shard_line(fanned))
    if this_run is None:
        return with_rounds(state, [*others, fanned])
    kept = [r for r in rounds if r in others or r is this_run]
    return with_rounds(state, [fanned if r is this_run else r for r in kept])


def alive_elsewhere(state: BatchRunState, run_id: int, alive: RoundAlive) -> list[VerifyRound]:
    """Rounds other workflow runs fanned out and are still running: their own jobs take them."""
    return [r for r in state.verify_rounds if r.run_id != run_id and alive(r.run_id)]


def with_rounds(state: BatchRunState, rounds: Sequence[VerifyRound]) -> BatchRunState:
    """`rounds`, oldest first, as the state's: the newest is `verifying`."""
    kept = list(rounds)[-(MAX_EARLIER_ROUNDS + 1) :]
    return state.model_copy(
        update={"verifying": kept[-1] if kept else None, "verifying_earlier": kept[:-1]}
    )


def own_lanes(ready: list[BatchChild], run_id: int | None, alive: RoundAlive) -> list[BatchChild]:
    """The ready lanes the bisect and integrate jobs of run `run_id` stack: their run's, and
    those of earlier runs (below them, which their stack job stacked too), not those of a later
    run whose integrate job may still come — its stack job fans them out, or its integrate job
    verifies them (ADR 0075). None (any other pass): every lane."""
    if run_id is None:
        return ready
    return [
        child
        for child in ready
        if not (
            child.lane is not None
            and isinstance(child.lane.runner, GithubRunner)
            and child.lane.runner.run_id > run_id
            and alive(child.lane.runner.run_id)
        )
    ]
