"""Dependency order and closures on random DAGs."""

from __future__ import annotations

import pytest
from hypothesis import given

from imm_action.plan.dag import CycleError, kahn_order, transitive_closures, transitive_dependents
from tests.unit.strategies import dags


def _reachable(graph: dict[str, list[str]], task: str) -> set[str]:
    found: set[str] = set()
    stack = list(graph[task])
    while stack:
        need = stack.pop()
        if need not in found:
            found.add(need)
            stack.extend(graph[need])
    return found


@given(dags())
def test_every_task_comes_after_its_dependencies(graph: dict[str, list[str]]) -> None:
    order = kahn_order(graph)
    position = {task: index for index, task in enumerate(order)}
    assert sorted(order) == sorted(graph)
    for task, needs in graph.items():
        assert all(position[need] < position[task] for need in needs)


@given(dags())
def test_order_is_kahn_layers_each_sorted_by_task_id(graph: dict[str, list[str]]) -> None:
    depth: dict[str, int] = {}
    for task in kahn_order(graph):
        depth[task] = 1 + max((depth[need] for need in graph[task]), default=-1)
    expected = sorted(graph, key=lambda task: (depth[task], task))
    assert kahn_order(graph) == expected


@given(dags())
def test_closures_are_exactly_the_reachable_dependencies(graph: dict[str, list[str]]) -> None:
    closures = transitive_closures(kahn_order(graph), graph)
    for task in graph:
        assert closures[task] == sorted(_reachable(graph, task))
        # transitive: the closure of every member is inside this closure
        for need in closures[task]:
            assert set(closures[need]) <= set(closures[task])


@given(dags())
def test_transitive_dependents_are_the_inverse_of_closures(graph: dict[str, list[str]]) -> None:
    closures = transitive_closures(kahn_order(graph), graph)
    for root in graph:
        expected = {task for task, closure in closures.items() if root in closure}
        assert transitive_dependents([root], graph) == expected


def test_a_cycle_is_refused_naming_the_tasks_on_it() -> None:
    graph = {"a": [], "b": ["a", "d"], "c": ["b"], "d": ["c"], "e": ["d"]}
    with pytest.raises(CycleError) as caught:
        kahn_order(graph)
    assert sorted(caught.value.tasks) == ["b", "c", "d"]
    assert "cycle" in str(caught.value)


def test_a_self_loop_is_a_cycle_of_one() -> None:
    with pytest.raises(CycleError) as caught:
        kahn_order({"a": ["a"]})
    assert caught.value.tasks == ("a",)
