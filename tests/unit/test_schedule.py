"""Parallel groups and the startable set: identical to the reference, and sound on their own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imm_action.plan.schedule import (
    AdmissionLimits,
    CandidateChild,
    ScheduleChild,
    parallel_groups,
    remaining_path_lengths,
    startable,
)
from imm_action.plan.scope import scopes_overlap
from tests import reference_port
from tests.unit.strategies import clean_scope_lists, schedule_inputs


def _ours(children: list[dict[str, Any]]) -> dict[str, Any]:
    projection = parallel_groups(
        [
            ScheduleChild(c["task_id"], tuple(c["blocked_by"]), tuple(c["scope_hint"]))
            for c in children
        ]
    )
    return {
        "parallel_groups": projection.parallel_groups,
        "scope_conflicts": [
            {"task_id": task, "overlaps_with": others}
            for task, others in projection.scope_conflicts
        ],
    }


@settings(max_examples=400)
@given(schedule_inputs())
def test_parallel_groups_are_identical_to_the_reference(children: list[dict[str, Any]]) -> None:
    assert _ours(children) == reference_port.project_parallel_groups(children)


@settings(max_examples=200)
@given(schedule_inputs(scopes=clean_scope_lists))
def test_parallel_groups_partition_the_children_into_independent_disjoint_groups(
    children: list[dict[str, Any]],
) -> None:
    groups = _ours(children)["parallel_groups"]
    flat = [task for group in groups for task in group]
    assert sorted(flat) == sorted(c["task_id"] for c in children)
    by_id = {c["task_id"]: c for c in children}
    wave_of = {task: number for number, group in enumerate(groups) for task in group}
    for group in groups:
        for position, task in enumerate(group):
            for other in group[position + 1 :]:
                assert not scopes_overlap(by_id[task]["scope_hint"], by_id[other]["scope_hint"])
                assert other not in by_id[task]["blocked_by"]
                assert task not in by_id[other]["blocked_by"]
    for child in children:
        assert all(wave_of[need] < wave_of[child["task_id"]] for need in child["blocked_by"])


def test_a_child_deferred_for_overlap_records_every_member_it_overlapped() -> None:
    children = [
        {"task_id": "a", "blocked_by": [], "scope_hint": ["src/a"]},
        {"task_id": "b", "blocked_by": [], "scope_hint": ["src/b"]},
        {"task_id": "c", "blocked_by": [], "scope_hint": ["src"]},
    ]
    assert _ours(children) == {
        "parallel_groups": [["a", "b"], ["c"]],
        "scope_conflicts": [{"task_id": "c", "overlaps_with": ["a", "b"]}],
    }


def test_parallel_groups_refuse_a_dependency_that_can_never_be_placed() -> None:
    with pytest.raises(ValueError, match="acyclic"):
        parallel_groups([ScheduleChild("a", ("ghost",), ("src",))])


STATES = ["pending", "lane_admitted", "settled", "lane_committed", "integrated", "released",
          "needs_human", "skipped_blocked"]  # fmt: skip


@settings(max_examples=300)
@given(schedule_inputs(), st.data(), st.integers(1, 5))
def test_startable_is_the_references_pick_in_critical_path_order(
    children: list[dict[str, Any]], data: st.DataObject, max_parallel: int
) -> None:
    for child in children:
        child["state"] = data.draw(st.sampled_from(STATES))
    candidates = [
        CandidateChild(
            task_id=c["task_id"],
            blocked_by=tuple(c["blocked_by"]),
            scope_hint=tuple(c["scope_hint"]),
            pending=c["state"] == "pending",
            in_flight=c["state"] in reference_port.IN_FLIGHT,
            done=c["state"] in reference_port.DONE,
        )
        for c in children
    ]
    # the reference's pick over the children in critical-path order, ties in plan order
    # (ADR 0056): the one way admission leaves the reference
    height = _chain_lengths(children)
    by_chain = sorted(children, key=lambda c: -height[c["task_id"]])
    expected = reference_port.startable_children(by_chain, max_parallel)
    assert startable(candidates, AdmissionLimits(max_parallel=max_parallel)) == expected


def _chain_lengths(children: list[dict[str, Any]]) -> dict[str, int]:
    """Longest chain of not-done tasks from each child on, by its definition: recursion over
    every not-done child that needs it."""
    done = {c["task_id"] for c in children if c["state"] in reference_port.DONE}

    def length(task: str) -> int:
        after = [c["task_id"] for c in children
                 if task in c["blocked_by"] and c["task_id"] not in done]  # fmt: skip
        return 1 + max((length(other) for other in after), default=0)

    return {c["task_id"]: length(c["task_id"]) for c in children}


def test_admission_starts_the_head_of_the_longest_chain_before_a_leaf_first_in_plan_order() -> None:
    """Issue 41 #6: plan order would give the one free slot to the leaf."""
    children = [
        _pending("leaf", ("leaf",)),
        _pending("head", ("head",)),
        _pending("mid", ("mid",), ("head",)),
        _pending("tail", ("tail",), ("head", "mid")),
    ]
    assert startable(children, AdmissionLimits(max_parallel=1)) == ["head"]
    assert startable(children, AdmissionLimits(max_parallel=2)) == ["head", "leaf"]


def test_admission_breaks_ties_between_equal_chains_by_plan_order() -> None:
    children = [
        _pending("b", ("b",)),
        _pending("a", ("a",)),
        _pending("b2", ("b2",), ("b",)),
        _pending("a2", ("a2",), ("a",)),
    ]
    assert startable(children, AdmissionLimits(max_parallel=1)) == ["b"]


def test_a_chain_of_ten_thousand_tasks_is_measured_without_recursion() -> None:
    names = [f"t{index}" for index in range(10_000)]
    chain = [_pending(name, (name,), tuple(names[:index])[-1:]) for index, name in enumerate(names)]
    assert remaining_path_lengths(chain)["t0"] == 10_000


def _pending(task_id: str, scope: tuple[str, ...], needs: tuple[str, ...] = ()) -> CandidateChild:
    return CandidateChild(task_id, needs, scope, pending=True, in_flight=False, done=False)


def test_startable_respects_the_admission_budget() -> None:
    children = [_pending("a", ("a",)), _pending("b", ("b",)), _pending("c", ("c",))]
    assert startable(children, AdmissionLimits(max_parallel=3, admissions_left=2)) == ["a", "b"]


def test_a_child_touching_a_barrier_file_runs_alone() -> None:
    children = [
        _pending("a", ("src/a",)),
        _pending("lock", ("pyproject.toml",)),
        _pending("b", ("src/b",)),
    ]
    limits = AdmissionLimits(max_parallel=3, barrier_globs=("pyproject.toml",))
    assert startable(children, limits) == ["a", "b"]
    alone = [_pending("lock", ("pyproject.toml",)), _pending("a", ("src/a",))]
    assert startable(alone, limits) == ["lock"]


def test_a_lane_waiting_for_the_integrator_frees_its_slot_but_keeps_its_scope() -> None:
    waiting = CandidateChild(
        "w", (), ("src/w",), pending=False, in_flight=True, done=False, holds_lane=False
    )
    children = [waiting, _pending("x", ("src/w/x",)), _pending("y", ("y",)), _pending("z", ("z",))]
    # one slot: the waiting lane holds none of it; x overlaps its scope, y starts
    assert startable(children, AdmissionLimits(max_parallel=1)) == ["y"]
    at_work = replace(waiting, holds_lane=True)
    assert startable([at_work, *children[1:]], AdmissionLimits(max_parallel=1)) == []


def test_a_task_ordered_after_another_starts_once_it_ended_landed_or_parked() -> None:
    """Issue 58: a check order is an order, not a dependency."""
    later = replace(_pending("c", ("c",)), after=("s",))
    limits = AdmissionLimits(max_parallel=2)
    assert startable([_pending("s", ("s",)), later], limits) == ["s"]
    at_work = CandidateChild("s", (), ("s",), pending=False, in_flight=True, done=False)
    assert startable([at_work, later], limits) == []
    for ended in (
        CandidateChild("s", (), ("s",), pending=False, in_flight=False, done=True),  # landed
        CandidateChild("s", (), ("s",), pending=False, in_flight=False, done=False),  # parked
    ):
        assert startable([ended, later], limits) == ["c"]


def _committed(task_id: str, scope: tuple[str, ...], needs: tuple[str, ...] = ()) -> CandidateChild:
    """A child whose lane committed and waits for the integrator (issue 61)."""
    return CandidateChild(task_id, needs, scope, pending=False, in_flight=True, done=False,
                          holds_lane=False, committed=True)  # fmt: skip


def test_a_dependent_of_committed_lanes_starts_speculatively_on_their_scope() -> None:
    # b builds on a's module: a's scope is its base's, not a conflict
    children = [_committed("a", ("src/m",)), _pending("b", ("src/m",), ("a",))]
    assert startable(children, AdmissionLimits(max_parallel=2, speculate=True)) == ["b"]
    assert startable(children, AdmissionLimits(max_parallel=2)) == []


def test_a_speculative_child_still_waits_for_a_dependency_at_work_or_a_foreign_scope() -> None:
    at_work = CandidateChild("a", (), ("a",), pending=False, in_flight=True, done=False)
    limits = AdmissionLimits(max_parallel=3, speculate=True)
    assert startable([at_work, _pending("b", ("b",), ("a",))], limits) == []
    # x is committed but no dependency of b's: its scope still keeps b out
    children = [_committed("a", ("a",)), _committed("x", ("src/m",)),
                _pending("b", ("src/m",), ("a",))]  # fmt: skip
    assert startable(children, limits) == []


@given(
    states=st.lists(
        st.sampled_from(["pending", "at_work", "committed", "done"]), min_size=2, max_size=8
    ),
)
def test_a_speculative_start_needs_every_dependency_landed_or_committed(states: list[str]) -> None:
    # a chain: each task needs every one before it, all in one scope; none further on than
    # what it needs
    rank = {"done": 3, "committed": 2, "at_work": 1, "pending": 0}
    states = sorted(states, key=lambda state: -rank[state])
    children = []
    for index, state in enumerate(states):
        needs = tuple(f"t{i}" for i in range(index))
        base = _pending(f"t{index}", ("src/m",), needs)
        children.append(
            {"pending": base,
             "at_work": replace(base, pending=False, in_flight=True),
             "committed": replace(base, pending=False, in_flight=True, holds_lane=False,
                                  committed=True),
             "done": replace(base, pending=False, done=True)}[state]
        )  # fmt: skip
    started = startable(children, AdmissionLimits(max_parallel=8, speculate=True))
    for task in started:
        index = int(task[1:])
        assert all(states[i] in ("committed", "done") for i in range(index))
        assert states[index] == "pending"
    first = next((i for i, s in enumerate(states) if s == "pending"), None)
    if first is not None and all(s in ("committed", "done") for s in states[:first]):
        assert started == [f"t{first}"]  # and only it: the next needs it
