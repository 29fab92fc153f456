"""Which stopped batch continues, and how its children carry over (pure, no git)."""

from __future__ import annotations

import pytest

from imm_action.errors import ImmError
from imm_action.integrate import transitions as t
from imm_action.integrate.continuation import (
    CannotContinue,
    Continue,
    Fresh,
    Stopped,
    StoppedFacts,
    continued_children,
    decide_stopped,
    has_stopped,
)
from imm_action.model.plan import BatchPlan
from imm_action.model.state import BatchChild, BatchRunState, BatchState, ChildState, SettledTask
from imm_action.passes.continuing import StartPlan, new_batch_state
from imm_action.plan.project import IntentReading, PlanOptions, build_plan
from tests.unit.test_project import _initiative, _valid
from tests.unit.test_transitions import _initial

HEAD = "f" * 40
NOW = "2026-12-05T10:00:00.000Z"


def _stopped() -> BatchRunState:
    """a integrated, b parked, c skipped behind b, d parked on its own."""
    state = _initial({"a": [], "b": ["a"], "c": ["b"], "d": []})
    state = t.admit(state, "a", state.base_head, "imm-lane/init/a", _runner())
    state = t.integrated(state, "a", "a" * 40)
    state = t.park(state, "b", "QA failure limit reached")
    state = t.park(state, "d", "executor exited with 3")
    return state.model_copy(update={"batch_state": BatchState.NEEDS_HUMAN})


def _runner():  # type: ignore[no-untyped-def]
    from imm_action.model.state import LocalRunner

    return LocalRunner(path="log", pid=None)


def _facts(state: BatchRunState | None, *, digest: str | None = None, holds: bool = True):  # type: ignore[no-untyped-def]
    return StoppedFacts(state, HEAD, digest or (state.plan_digest if state else ""), holds)


def test_a_parked_batch_with_nothing_in_flight_has_stopped() -> None:
    assert has_stopped(_stopped())
    assert not has_stopped(_initial({"a": []}))  # running


@pytest.mark.parametrize(
    ("policy", "changed", "expected"),
    [
        (Stopped.RESUME, True, type(None)),
        (Stopped.CONTINUE, False, Continue),
        (Stopped.CONTINUE_IF_PLAN_CHANGED, False, type(None)),
        (Stopped.CONTINUE_IF_PLAN_CHANGED, True, Continue),
        (Stopped.FRESH, False, Fresh),
    ],
)
def test_what_a_request_does_with_a_stopped_batch(
    policy: Stopped, changed: bool, expected: type
) -> None:
    state = _stopped()
    digest = "sha256:" + "7" * 64 if changed else None
    assert isinstance(decide_stopped(policy, _facts(state, digest=digest)), expected)


def test_a_branch_that_lost_the_stopped_batchs_work_cannot_be_continued() -> None:
    decided = decide_stopped(Stopped.CONTINUE, _facts(_stopped(), holds=False))
    assert isinstance(decided, CannotContinue)
    assert "--fresh" in decided.message


def test_a_running_batch_is_never_continued() -> None:
    assert decide_stopped(Stopped.CONTINUE, _facts(_initial({"a": []}))) is None


def test_a_batch_whose_plan_changed_continues_though_lanes_are_still_in_flight() -> None:
    state = _initial({"a": [], "b": []})
    state = t.admit(state, "a", state.base_head, "imm-lane/init/a", _runner())
    state = state.model_copy(update={"batch_state": BatchState.NEEDS_HUMAN})  # plan changed
    changed = "sha256:" + "7" * 64
    assert isinstance(decide_stopped(Stopped.CONTINUE, _facts(state, digest=changed)), Continue)
    assert decide_stopped(Stopped.CONTINUE, _facts(state)) is None  # same plan: lanes run on


def test_fresh_archives_under_the_latest_batch_and_supersedes_a_live_one() -> None:
    state = _stopped()
    decided = decide_stopped(Stopped.FRESH, _facts(state))
    assert decided == Fresh(branch_head=HEAD, archive_as=state.batch_id, supersede=state.batch_id)


def _plan() -> BatchPlan:
    graph = {"a": [], "b": ["a"], "c": ["b"], "d": []}
    readings: dict[str, IntentReading] = {task: _valid(task) for task in graph}
    return build_plan(_initiative(graph), readings, PlanOptions(max_parallel=2))


def test_a_continuation_keeps_what_landed_and_runs_the_rest_again() -> None:
    children = {c.task_id: c for c in continued_children(_plan(), _stopped())}
    assert (children["a"].state, children["a"].commit) == (ChildState.INTEGRATED, "a" * 40)
    assert {task: str(children[task].state) for task in "bcd"} == dict.fromkeys("bcd", "pending")


def test_a_retry_continuation_runs_only_the_task_and_what_it_skipped() -> None:
    children = {c.task_id: c for c in continued_children(_plan(), _stopped(), retry="b")}
    assert {task: str(c.state) for task, c in children.items()} == {
        "a": "integrated", "b": "pending", "c": "pending", "d": "needs_human"
    }  # fmt: skip
    assert children["d"].reason == "executor exited with 3"


def _start(plan: BatchPlan, settled: tuple[SettledTask, ...]) -> StartPlan:
    return StartPlan(
        slug="init", plan=plan, base_ref="main", base_head=HEAD, authorized_by="local:t",
        new_batch_id="batch-init-2", stopped=Stopped.CONTINUE, retry=None, settled=settled,
    )  # fmt: skip


def _settled_plan() -> BatchPlan:
    graph = {"a": [], "b": ["a"]}
    readings: dict[str, IntentReading] = {task: _valid(task) for task in graph}
    options = PlanOptions(max_parallel=2, integrated_before={"a": "batch-init-1"})
    return build_plan(_initiative(graph), readings, options)


def test_a_new_batch_records_the_tasks_an_earlier_batch_settled_with_their_commits() -> None:
    plan = _settled_plan()
    settled = SettledTask(task_id="a", batch_id="batch-init-1", commit="a" * 40)
    children = [BatchChild.pending("b", "s-b", [])]
    state = new_batch_state(_start(plan, (settled,)), NOW, children, HEAD, [], flaky_before={})
    assert state.settled_before == [settled]


def test_a_new_batch_that_would_drop_a_task_of_its_plan_is_refused() -> None:
    """Issue 41 #1: a task planned as settled whose work is on no line of the batch."""
    children = [BatchChild.pending("b", "s-b", [])]
    with pytest.raises(ImmError, match="would leave out a"):
        new_batch_state(_start(_settled_plan(), ()), NOW, children, HEAD, [], flaky_before={})
