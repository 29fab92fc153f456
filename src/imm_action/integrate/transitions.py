"""Pure state transitions of a batch (SPEC §4.6). Each takes a state and returns a new one;
none does I/O. The store re-validates every invariant before a state is written."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from imm_action.integrate.reasons import (
    CANCELLED,
    DEPENDENCY_PARKED,
    HEAD_CHECK_FAILED,
    LANE_LOST,
    RUN_CANCELLED,
)
from imm_action.model.outcome import Failure
from imm_action.model.spend import NO_SPEND, AgentSpend
from imm_action.model.state import (
    IN_FLIGHT_STATES,
    MAX_FLAKY_KEPT,
    UNCONFINED_CAUSES,
    UNCONFINED_MAX,
    AdoptedHead,
    BatchChild,
    BatchRunState,
    BatchState,
    BranchVerdict,
    ChildState,
    GithubRunner,
    Lane,
    QuarantinedHead,
    Runner,
)

Decision = Callable[[BatchRunState], BatchRunState]  # a person's decision, applied by a pass
LOST_ATTEMPTS_LIMIT = 3


class TransitionError(ValueError):
    """A transition the state machine does not allow (a bug in the caller, or a stale view)."""


def child_of(state: BatchRunState, task_id: str) -> BatchChild:
    for child in state.children:
        if child.task_id == task_id:
            return child
    raise TransitionError(f"batch {state.batch_id} has no child {task_id}")


def _with_child(batch: BatchRunState, task_id: str, update: dict[str, Any]) -> BatchRunState:
    children = [
        child.model_copy(update=update) if child.task_id == task_id else child
        for child in batch.children
    ]
    return batch.model_copy(update={"children": children})


def _require(child: BatchChild, allowed: Iterable[ChildState], action: str) -> None:
    allowed = tuple(allowed)
    if child.state not in allowed:
        names = ", ".join(str(state) for state in allowed)
        raise TransitionError(f"cannot {action} {child.task_id}: it is {child.state}, not {names}")


def admit(
    state: BatchRunState,
    task_id: str,
    base_head: str,
    branch: str,
    runner: Runner,
    *,
    speculative_on: Sequence[str] = (),
) -> BatchRunState:
    """`speculative_on`: the committed dependencies whose lane commits `base_head` holds on the
    batch head (a speculative lane, issue 61)."""
    child = child_of(state, task_id)
    _require(child, [ChildState.PENDING], "admit")
    lane = Lane(
        branch=branch, base_head=base_head, lane_commit=None, runner=runner,
        speculative_on=list(speculative_on) or None,
    )  # fmt: skip
    return _with_child(
        state, task_id, {"state": ChildState.LANE_ADMITTED, "lane": lane, "reason": None}
    )


def lane_committed(
    state: BatchRunState, task_id: str, lane_commit: str, qa_failures: int
) -> BatchRunState:
    child = child_of(state, task_id)
    _require(child, [ChildState.LANE_ADMITTED, ChildState.SETTLED], "record the lane commit of")
    lane = _lane_of(child).model_copy(update={"lane_commit": lane_commit})
    return _with_child(
        state,
        task_id,
        {"state": ChildState.LANE_COMMITTED, "lane": lane, "qa_failures": qa_failures},
    )


def integrated(
    state: BatchRunState, task_id: str, commit: str, retired: Sequence[str] = ()
) -> BatchRunState:
    """The child landed at `commit`; `retired`: the tests its intent retires (issue 58)."""
    child = child_of(state, task_id)
    _require(
        child,
        [ChildState.LANE_COMMITTED, ChildState.LANE_ADMITTED, ChildState.SETTLED],
        "integrate",
    )
    held = _lane_of(child)
    lane = held if held.lane_commit else held.model_copy(update={"lane_commit": commit})
    updated = _with_child(
        state,
        task_id,
        {"state": ChildState.INTEGRATED, "commit": commit, "lane": lane, "reason": None,
         "retired_tests": list(retired) or None},
    )  # fmt: skip
    return updated.model_copy(update={"commits": [*state.commits, commit]})


def park(
    state: BatchRunState,
    task_id: str,
    reason: str,
    qa_failures: int | None = None,
    failures: Sequence[Failure] = (),
    *,
    outside_scope: Sequence[str] = (),
) -> BatchRunState:
    """A child needs a person; every pending child that depends on it is skipped. `failures`
    are the failed commands behind the reason, shown wherever the reason is; `outside_scope`
    the failing tests when all lie outside its scope (no retry as it is can pass them)."""
    child = child_of(state, task_id)
    _require(child, [ChildState.PENDING, *(s for s in ChildState if s.in_flight)], "park")
    update: dict[str, Any] = {
        "state": ChildState.NEEDS_HUMAN,
        "reason": reason,
        "failures": list(failures),
        "failing_outside_scope": list(outside_scope) or None,
    }
    if qa_failures is not None:
        update["qa_failures"] = qa_failures
    return skip_dependents(_with_child(state, task_id, update), task_id)


def skip_dependents(state: BatchRunState, task_id: str) -> BatchRunState:
    # blocked_by is the transitive closure, so one sweep reaches every dependent.
    reason = DEPENDENCY_PARKED.format(task_id=task_id)
    children = [
        child.model_copy(
            update={"state": ChildState.SKIPPED_BLOCKED, "reason": reason, "lane": None}
        )
        if child.state is ChildState.PENDING and task_id in child.blocked_by
        else child
        for child in state.children
    ]
    return state.model_copy(update={"children": children})


def lane_lost(state: BatchRunState, task_id: str, why: str) -> BatchRunState:
    """The lane's runner ended without an outcome: infrastructure, not the task. Back to
    pending for another attempt; parked only when it keeps happening."""
    child = child_of(state, task_id)
    _require(child, [ChildState.LANE_ADMITTED, ChildState.SETTLED], "re-admit")
    attempts = child.attempts + 1
    if attempts >= LOST_ATTEMPTS_LIMIT:
        moved = _with_child(state, task_id, {"attempts": attempts})
        return park(moved, task_id, f"{LANE_LOST}: {why} ({attempts} lost attempts)")
    return _with_child(
        state, task_id, {"state": ChildState.PENDING, "lane": None, "attempts": attempts}
    )


def lane_cancelled(state: BatchRunState, task_id: str, why: str) -> BatchRunState:
    """The lane's job was cancelled with its workflow run: a person stopped the batch. The
    lane goes back to pending, no attempt counted lost (a continuation runs it again), and
    the batch stops with `why` (its verdict: cancelled)."""
    child = child_of(state, task_id)
    _require(child, [ChildState.LANE_ADMITTED, ChildState.SETTLED], "cancel")
    back = _with_child(state, task_id, {"state": ChildState.PENDING, "lane": None})
    return back.model_copy(update={"stop_reason": state.stop_reason or why})


def run_cancelled(state: BatchRunState) -> bool:
    """Whether a cancelled workflow run stopped the batch (`lane_cancelled`)."""
    return bool(state.stop_reason and state.stop_reason.startswith(RUN_CANCELLED))


def resume_after_cancel(state: BatchRunState) -> BatchRunState:
    """A person asked the batch stopped by a cancelled run to go on."""
    return state.model_copy(update={"stop_reason": None})


def lane_orphaned(state: BatchRunState, task_id: str) -> BatchRunState:
    """The coordinator that ran the lane died: not the task's attempt, just start it again."""
    child = child_of(state, task_id)
    _require(child, [ChildState.LANE_ADMITTED, ChildState.SETTLED], "re-admit")
    return _with_child(state, task_id, {"state": ChildState.PENDING, "lane": None})


def record_job(
    state: BatchRunState, task_id: str, job_id: int, name: str, url: str
) -> BatchRunState:
    """The GitHub job that carries a lane attempt was found: record it with the attempt."""
    child = child_of(state, task_id)
    _require(child, [ChildState.LANE_ADMITTED, ChildState.SETTLED], "record the job of")
    lane = _lane_of(child)
    if not isinstance(lane.runner, GithubRunner):
        raise TransitionError(f"lane {task_id} does not run on GitHub")
    runner = lane.runner.model_copy(update={"job": name, "job_id": job_id, "job_url": url})
    return _with_child(state, task_id, {"lane": lane.model_copy(update={"runner": runner})})


def _lane_of(child: BatchChild) -> Lane:
    if child.lane is None:
        raise TransitionError(f"{child.task_id} is {child.state} without a lane")
    return child.lane


def retry(state: BatchRunState, task_id: str) -> BatchRunState:
    """A parked child and the dependents it skipped go back to pending."""
    child = child_of(state, task_id)
    _require(child, [ChildState.NEEDS_HUMAN], "retry")
    reset = _with_child(
        state,
        task_id,
        {
            "state": ChildState.PENDING,
            "reason": None,
            "lane": None,
            "qa_failures": 0,
            "failures": [],
        },
    )
    skipped_by_it = DEPENDENCY_PARKED.format(task_id=task_id)
    children = [
        c.model_copy(update={"state": ChildState.PENDING, "reason": None})
        if c.state is ChildState.SKIPPED_BLOCKED and c.reason == skipped_by_it
        else c
        for c in reset.children
    ]
    batch_state = (
        BatchState.RUNNING if state.batch_state is BatchState.NEEDS_HUMAN else state.batch_state
    )
    return reset.model_copy(update={"children": children, "batch_state": batch_state})


def stop_in_flight(state: BatchRunState, reason: str) -> BatchRunState:
    children = [
        c.model_copy(update={"state": ChildState.NEEDS_HUMAN, "reason": reason})
        if c.state.in_flight
        else c
        for c in state.children
    ]
    return state.model_copy(update={"children": children})


def cancel(state: BatchRunState) -> BatchRunState:
    stopped = stop_in_flight(state, CANCELLED)
    return stopped.model_copy(update={"batch_state": BatchState.CANCELLED})


def fail_lineage(state: BatchRunState, reason: str) -> BatchRunState:
    """The batch fails with the reason kept on the state (no lane may be in flight to carry
    it), every lane in flight parked with it, and the dependents of every parked child skipped,
    as the reference's `failLineage` does."""
    stopped = stop_in_flight(state, reason)
    for child in stopped.children:
        if child.state is ChildState.NEEDS_HUMAN:
            stopped = skip_dependents(stopped, child.task_id)
    return stopped.model_copy(update={"batch_state": BatchState.FAILED, "stop_reason": reason})


def quarantine(state: BatchRunState, kept: QuarantinedHead) -> BatchRunState:
    """A foreign head is kept aside and the branch put back: the batch goes on from its last
    verified head (issue 42 #4; it failed before, costing every lane in flight)."""
    return state.model_copy(update={"quarantined": [*state.quarantined, kept]})


def head_check_failed(state: BatchRunState, reason: str) -> BatchRunState:
    """The batch waits for a person: a check the branch's head should pass does not. Its
    ready lanes stay ready (none is blamed); the next pass tries again."""
    return state.model_copy(update={"batch_state": BatchState.NEEDS_HUMAN, "stop_reason": reason})


def record_head_checks(state: BatchRunState, verified: int, carried: int = 0) -> BatchRunState:
    """The branch moves to a tree on which `verified` checks passed — those of every task it
    holds — `carried` of them carried over by their declared reads, not run there."""
    return state.model_copy(update={"head_checks": verified, "head_checks_carried": carried})


def judge_head_again(state: BatchRunState) -> BatchRunState:
    """A pass with ready lanes verifies the head's checks again: a head that failed them
    (after a person fixed the environment, say) is not held against the batch from memory."""
    if state.stop_reason and state.stop_reason.startswith(HEAD_CHECK_FAILED):
        return state.model_copy(update={"stop_reason": None})
    return state


def adopt_head(
    state: BatchRunState, previous: str, head: str, by: str | None = None
) -> BatchRunState:
    adopted = AdoptedHead.model_validate({"from": previous, "to": head, "by": by})
    return state.model_copy(update={"adopted_heads": [*state.adopted_heads, adopted]})


def admissions_used(state: BatchRunState) -> int:
    """Children that hold (or held) a lane: what the max_children budget counts."""
    return sum(1 for child in state.children if child.lane is not None)


def spent(state: BatchRunState, task_id: str, spend: AgentSpend) -> BatchRunState:
    """`spend` added to a child's (an outcome taken, a lane lost; issue 45): what was spent,
    whatever becomes of the lane."""
    known = child_of(state, task_id).spend or NO_SPEND
    return _with_child(state, task_id, {"spend": known.plus(spend)})


def note_unconfined(state: BatchRunState, causes: Sequence[str]) -> BatchRunState:
    """`state` with each new cause of lane code running unconfined recorded, once each (at
    most eight: the list says that it happened and why, not how often)."""
    known = list(state.unconfined)
    for cause in causes:
        if cause not in known and len(known) < UNCONFINED_CAUSES:
            known.append(cause[:UNCONFINED_MAX])
    if known == state.unconfined:
        return state
    return state.model_copy(update={"unconfined": known})


def note_held_checks(state: BatchRunState, held: Literal["all", "branch"]) -> BatchRunState:
    """What gated the batch's moves besides its branch checks, for its report (issue 44)."""
    return state if state.held_checks == held else state.model_copy(update={"held_checks": held})


def note_branch_verdicts(state: BatchRunState, verdicts: list[BranchVerdict]) -> BatchRunState:
    """Each branch check's last verdict on the head (issue 44): a check not run on a new head
    keeps saying it was not run there, never an older head's verdict."""
    if state.branch_verdicts == verdicts:
        return state
    return state.model_copy(update={"branch_verdicts": verdicts})


def note_flaky(state: BatchRunState, flips: Sequence[str]) -> BatchRunState:
    """Count each flip of a test (a failure on a tree, then a pass there; or a failure of a
    test the config lists) in the batch's record of flaky tests (issue 61): from then on its
    failures are confirmed, never blamed on one run. The first MAX_FLAKY_KEPT tests are kept."""
    if not flips:
        return state
    counts = dict(state.flaky_tests)
    for test in flips:
        if test in counts or len(counts) < MAX_FLAKY_KEPT:
            counts[test] = counts.get(test, 0) + 1
    return state.model_copy(update={"flaky_tests": counts})


def set_back_speculative(state: BatchRunState) -> tuple[BatchRunState, tuple[str, ...]]:
    """Speculative lanes (issue 61) a dependency of which will not land as it committed — it
    was parked, cancelled or set back itself — go back to pending, with what their agents
    spent; they are admitted again once their dependencies land. So does one that failed in
    its lane: it failed on a base that will never be (a speculative lane reaches integration
    only once its dependencies landed). Returns the tasks set back."""
    set_back: list[str] = []
    while True:
        states = {child.task_id: child.state for child in state.children}
        lost = [
            child.task_id
            for child in state.children
            if child.state in (*IN_FLIGHT_STATES, ChildState.NEEDS_HUMAN)
            and child.lane is not None
            and child.lane.speculative_on
            and any(
                states.get(task) not in (ChildState.LANE_COMMITTED, ChildState.INTEGRATED)
                for task in child.lane.speculative_on
            )
        ]
        if not lost:
            break
        for task_id in lost:
            state = _with_child(
                state, task_id, {"state": ChildState.PENDING, "lane": None, "reason": None}
            )
        set_back += lost
    if set_back:  # back to pending, one whose dependency is parked is skipped, as if it waited
        for child in state.children:
            if child.state is ChildState.NEEDS_HUMAN:
                state = skip_dependents(state, child.task_id)
    return state, tuple(set_back)
