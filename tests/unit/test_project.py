"""Plan projection: classification, budget, digest and determinism."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.model.initiative import Initiative, InitiativeTask, LocalCarrier
from imm_action.model.intent import IntentReading, InvalidIntent, TaskIntent, ValidIntent
from imm_action.plan.dag import transitive_dependents
from imm_action.plan.project import PlanInputError, PlanOptions, build_plan
from tests.conftest import intent
from tests.unit.strategies import dags


def _initiative(graph: dict[str, list[str]]) -> Initiative:
    tasks = tuple(
        InitiativeTask(task_id=task, slice_id=f"s-{task}", blocked_by=needs)
        for task, needs in sorted(graph.items())
    )
    return Initiative(
        slug="init", carrier=LocalCarrier(path="docs/initiatives/init.md"), tasks=tasks
    )


def _valid(task_id: str, **overrides: object) -> ValidIntent:
    model = TaskIntent.model_validate_json(json.dumps(intent(task_id, **overrides)))
    return ValidIntent(model, model.content_hash())


def _readings(graph: dict[str, list[str]], kinds: dict[str, str]) -> dict[str, IntentReading]:
    readings: dict[str, IntentReading] = {}
    for task in graph:
        kind = kinds.get(task, "ok")
        if kind == "invalid":
            readings[task] = InvalidIntent("bad")
        elif kind == "critical":
            readings[task] = _valid(task, risk="critical")
        elif kind == "ok":
            readings[task] = _valid(task)
    return readings


@st.composite
def classified_dags(draw: st.DrawFn) -> tuple[dict[str, list[str]], dict[str, str]]:
    graph = draw(dags())
    kinds = {
        task: draw(st.sampled_from(["ok", "ok", "ok", "invalid", "critical", "missing"]))
        for task in graph
    }
    return graph, kinds


@given(classified_dags())
def test_excluded_tasks_take_exactly_their_transitive_dependents_with_them(
    case: tuple[dict[str, list[str]], dict[str, str]],
) -> None:
    graph, kinds = case
    plan = build_plan(_initiative(graph), _readings(graph, kinds), PlanOptions(max_parallel=4))
    bad = [task for task, kind in kinds.items() if kind != "ok"]
    expected_blocked = transitive_dependents(bad, graph) - set(bad)
    status = {child.task_id: child.status for child in plan.children}
    assert {task for task, value in status.items() if value == "blocked"} == expected_blocked
    assert {task for task, value in status.items() if value == "needs_human"} == set(bad)
    assert [c.task_id for c in plan.enrollable] == [
        task for task in plan.order if status[task] == "enrollable"
    ]
    assert sorted(c.task_id for c in plan.excluded) == sorted(set(bad) | expected_blocked)


@given(classified_dags())
def test_planning_the_same_input_twice_gives_byte_identical_json(
    case: tuple[dict[str, list[str]], dict[str, str]],
) -> None:
    graph, kinds = case
    first = build_plan(_initiative(graph), _readings(graph, kinds), PlanOptions(max_parallel=2))
    second = build_plan(_initiative(graph), _readings(graph, kinds), PlanOptions(max_parallel=2))
    assert first.model_dump_json() == second.model_dump_json()


@given(dags())
def test_parallel_groups_partition_the_enrollable_set(graph: dict[str, list[str]]) -> None:
    plan = build_plan(_initiative(graph), _readings(graph, {}), PlanOptions(max_parallel=3))
    grouped = sorted(task for group in plan.parallel_groups for task in group)
    assert grouped == sorted(child.task_id for child in plan.enrollable)


def test_reasons_name_the_classification() -> None:
    graph = {"a": [], "b": [], "c": ["a"], "d": ["b"], "e": []}
    readings = _readings(graph, {"a": "invalid", "b": "critical"})
    plan = build_plan(_initiative(graph), readings, PlanOptions(max_parallel=2))
    reasons = {child.task_id: (child.status, child.reason) for child in plan.children}
    assert reasons == {
        "a": ("needs_human", "invalid_intent: bad"),
        "b": ("needs_human", "critical"),
        "c": ("blocked", "dependency_unavailable"),
        "d": ("blocked", "dependency_unavailable"),
        "e": ("enrollable", None),
    }


def test_a_task_integrated_by_an_earlier_batch_unblocks_its_dependents() -> None:
    graph = {"a": [], "b": ["a"]}
    options = PlanOptions(max_parallel=2, integrated_before={"a": "batch-init-1"})
    plan = build_plan(_initiative(graph), _readings(graph, {}), options)
    assert [(c.task_id, c.status) for c in plan.children] == [
        ("a", "already_settled"),
        ("b", "enrollable"),
    ]
    assert plan.parallel_groups == [["b"]]


def test_the_digest_changes_when_an_intent_changes() -> None:
    graph = {"a": []}
    one = build_plan(_initiative(graph), {"a": _valid("a")}, PlanOptions(max_parallel=1))
    two = build_plan(
        _initiative(graph), {"a": _valid("a", goal="Other")}, PlanOptions(max_parallel=1)
    )
    assert one.plan_digest != two.plan_digest
    assert one.plan_digest.startswith("sha256:")


def test_the_digest_is_sha256_of_the_compact_sorted_enrollable_list() -> None:
    import hashlib

    graph = {"a": [], "b": ["a"]}
    plan = build_plan(_initiative(graph), _readings(graph, {}), PlanOptions(max_parallel=1))
    payload = json.dumps(
        [e.model_dump() for e in plan.enrollable], sort_keys=True, separators=(",", ":")
    )
    assert plan.plan_digest == "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def test_budget_defaults_to_every_enrollable_task() -> None:
    graph = {"a": [], "b": []}
    plan = build_plan(_initiative(graph), _readings(graph, {}), PlanOptions(max_parallel=1))
    assert (plan.budget.max_children, plan.budget.qa_failure_limit) == (2, 2)


def test_a_budget_above_the_enrollable_count_means_every_task() -> None:
    graph = {"a": [], "b": []}
    options = PlanOptions(max_parallel=1, max_children=3)
    plan = build_plan(_initiative(graph), _readings(graph, {}), options)
    assert plan.budget.max_children == 2


def test_a_budget_below_the_enrollable_count_is_kept() -> None:
    graph = {"a": [], "b": [], "c": []}
    options = PlanOptions(max_parallel=1, max_children=2)
    plan = build_plan(_initiative(graph), _readings(graph, {}), options)
    assert plan.budget.max_children == 2


@pytest.mark.parametrize("options", [PlanOptions(max_parallel=0), PlanOptions(max_parallel=257),
                                     PlanOptions(max_parallel=1, max_children=0)])  # fmt: skip
def test_impossible_options_are_refused(options: PlanOptions) -> None:
    graph = {"a": [], "b": []}
    with pytest.raises(PlanInputError):
        build_plan(_initiative(graph), _readings(graph, {}), options)
