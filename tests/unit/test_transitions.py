"""Batch state transitions: every state any sequence of them reaches satisfies §4.6."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imm_action.integrate import transitions as t
from imm_action.integrate.verdict import build_report, verdict
from imm_action.model.state import (
    STATE_CONTRACT,
    BatchChild,
    BatchRunState,
    BatchState,
    ChildState,
    LocalRunner,
    StateBudget,
)
from imm_action.plan.dag import kahn_order, transitive_closures
from tests.unit.strategies import dags

NOW = "2026-12-02T10:00:00.000Z"
RUNNER = LocalRunner(path="/tmp/lane", pid=None)
OPERATIONS = ["admit", "commit", "integrate", "park", "lost", "orphaned", "retry", "cancel", "fail"]


def _oid(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def _initial(graph: dict[str, list[str]]) -> BatchRunState:
    order = kahn_order(graph)
    closures = transitive_closures(order, graph)
    children = [
        BatchChild(
            task_id=task,
            slice_id=f"s-{task}",
            blocked_by=closures[task],
            state=ChildState.PENDING,
            reason=None,
            commit=None,
            lane=None,
            qa_failures=0,
            attempts=0,
        )
        for task in order
    ]
    return BatchRunState(
        contract=STATE_CONTRACT, batch_id="batch-x-1", initiative_slug="x",
        carrier={"kind": "local", "path": "docs/initiatives/x.md"},  # type: ignore[arg-type]
        plan_digest="sha256:" + "0" * 64, base_ref="main", base_head=_oid("base"), branch="imm/x",
        authorized_by="local:test", confirmation_time=NOW,
        budget=StateBudget(max_children=len(order), qa_failure_limit=2),
        max_parallel=2, batch_state=BatchState.RUNNING, children=children, commits=[],
        adopted_heads=[],
        created_at=NOW, updated_at=NOW,
    )  # fmt: skip


def _apply(state: BatchRunState, operation: str, task: str, step: int) -> BatchRunState:
    match operation:
        case "admit":
            done = {c.task_id for c in state.children if c.state.done}
            if not set(t.child_of(state, task).blocked_by) <= done:
                raise t.TransitionError("dependencies not done")
            return t.admit(state, task, _oid("head", step), f"imm-lane/x/{task}", RUNNER)
        case "commit":
            return t.lane_committed(state, task, _oid("lane", task, step), 0)
        case "integrate":
            if t.child_of(state, task).state is not ChildState.LANE_COMMITTED:
                raise t.TransitionError("not committed")
            return t.integrated(state, task, _oid("candidate", task, step))
        case "park":
            return t.park(state, task, "parked by the test")
        case "lost":
            return t.lane_lost(state, task, "runner gone")
        case "orphaned":
            return t.lane_orphaned(state, task)
        case "retry":
            return t.retry(state, task)
        case "cancel":
            return t.cancel(state)
        case _:
            return t.fail_lineage(state, "batch_head_lineage_broken: test")


def _valid(state: BatchRunState) -> BatchRunState:
    return BatchRunState.model_validate_json(
        json.dumps(state.model_dump(mode="json", by_alias=True))
    )


@settings(max_examples=300)
@given(
    dags(max_tasks=6),
    st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 5)), max_size=40),
)
def test_every_state_reached_by_any_transition_sequence_is_valid(
    graph: dict[str, list[str]], steps: list[tuple[str, int]]
) -> None:
    state = _initial(graph)
    tasks = [c.task_id for c in state.children]
    for step, (operation, pick) in enumerate(steps):
        if state.batch_state.is_terminal and operation not in ("retry",):
            continue
        try:
            state = _apply(state, operation, tasks[pick % len(tasks)], step)
        except t.TransitionError:
            continue
        decided = verdict(state, [])
        state = _valid(state.model_copy(update={"batch_state": decided.batch_state}))
        build_report(state, decided, NOW)  # every unfinished child carries a reason


def test_parking_skips_exactly_the_pending_dependents() -> None:
    state = _initial({"a": [], "b": ["a"], "c": ["b"], "d": []})
    state = t.admit(state, "a", _oid("h"), "imm-lane/x/a", RUNNER)
    state = t.park(state, "a", "broken")
    assert {c.task_id: (str(c.state), c.reason) for c in state.children} == {
        "a": ("needs_human", "broken"),
        "b": ("skipped_blocked", "dependency a parked"),
        "c": ("skipped_blocked", "dependency a parked"),
        "d": ("pending", None),
    }
    back = t.retry(state, "a")
    assert [str(c.state) for c in back.children] == ["pending"] * 4


def test_a_lane_lost_three_times_is_parked() -> None:
    state = _initial({"a": []})
    for _ in range(2):
        state = t.lane_lost(t.admit(state, "a", _oid("h"), "imm-lane/x/a", RUNNER), "a", "gone")
        assert state.children[0].state is ChildState.PENDING
    state = t.lane_lost(t.admit(state, "a", _oid("h"), "imm-lane/x/a", RUNNER), "a", "gone")
    assert state.children[0].state is ChildState.NEEDS_HUMAN
    assert (state.children[0].reason or "").startswith("batch_lane_lost: gone (3 lost attempts)")


def test_an_orphaned_lane_is_not_counted_as_an_attempt() -> None:
    state = t.lane_orphaned(
        t.admit(_initial({"a": []}), "a", _oid("h"), "imm-lane/x/a", RUNNER), "a"
    )
    assert (state.children[0].state, state.children[0].attempts) == (ChildState.PENDING, 0)


def test_an_illegal_transition_is_refused() -> None:
    with pytest.raises(t.TransitionError, match="cannot integrate a: it is pending"):
        t.integrated(_initial({"a": []}), "a", _oid("x"))
