"""Projecting an initiative and its intents into a batch plan (pure: data in, plan out)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from imm_action.model.common import sha256_digest
from imm_action.model.initiative import Initiative, InitiativeTask
from imm_action.model.intent import IntentReading, InvalidIntent, ValidIntent, intent_path
from imm_action.model.plan import (
    DEFAULT_QA_FAILURE_LIMIT,
    MAX_PARALLEL_LIMIT,
    PLAN_CONTRACT,
    BatchPlan,
    ChildStatus,
)
from imm_action.plan.check_paths import CheckOrder, check_orders, intent_conflicts, runs_after
from imm_action.plan.dag import kahn_order, transitive_closures
from imm_action.plan.schedule import ScheduleChild, parallel_groups

REASON_CRITICAL = "critical"
REASON_DEPENDENCY_UNAVAILABLE = "dependency_unavailable"
REASON_INVALID_INTENT = "invalid_intent"
SETTLED_BY = "already integrated by batch "


class PlanInputError(ValueError):
    """Plan options that cannot describe a batch (e.g. a budget larger than the initiative)."""


@dataclass(frozen=True)
class PlanOptions:
    max_parallel: int
    qa_failure_limit: int = DEFAULT_QA_FAILURE_LIMIT
    max_children: int | None = None
    # Tasks that completed batches of this initiative integrated (task id -> batch id): planned
    # `already_settled`. ("settled" alone is the child state of a lane that published its outcome.)
    integrated_before: Mapping[str, str] = field(default_factory=dict)


def build_plan(
    initiative: Initiative, intents: Mapping[str, IntentReading], options: PlanOptions
) -> BatchPlan:
    _check_options(options)
    dependencies = {task.task_id: task.blocked_by for task in initiative.tasks}
    order = kahn_order(dependencies)
    closures = transitive_closures(order, dependencies)
    tasks = {task.task_id: task for task in initiative.tasks}
    children = _classify(order, tasks, closures, intents, options.integrated_before)
    # what ownership of named paths needs (issue 58): a task whose scope covers a path another
    # task's check names runs before it — an order, not a dependency: the later task waits
    # for the earlier to end, landed or parked
    orders = _check_orders(children, closures, intents)
    enrollable = [
        {
            "task_id": child["task_id"],
            "intent_path": child["intent_path"],
            "intent_revision": child["intent_revision"],
            "intent_content_hash": child["intent_content_hash"],
            "blocked_by": child["blocked_by"],
        }
        for child in children
        if child["status"] == "enrollable"
    ]
    excluded = [
        {"task_id": child["task_id"], "slice_id": child["slice_id"], "reason": child["reason"]}
        for child in children
        if child["status"] != "enrollable"
    ]
    projection = parallel_groups(_schedule_view(enrollable, intents, orders))
    # One validation of the whole plan: pydantic-core checks 10,000 children in one call far
    # faster than 30,000 model constructors would.
    return BatchPlan.model_validate(
        {
            "contract": PLAN_CONTRACT,
            "initiative": initiative.slug,
            "carrier": initiative.carrier,
            "order": order,
            "children": children,
            "enrollable": enrollable,
            "excluded": excluded,
            "budget": _budget(options, len(enrollable)),
            "max_parallel": options.max_parallel,
            "parallel_groups": projection.parallel_groups,
            "scope_conflicts": [
                {"task_id": task_id, "overlaps_with": others}
                for task_id, others in projection.scope_conflicts
            ],
            "plan_digest": plan_digest(enrollable),
            "check_orders": [
                {"task_id": added.owner, "after": added.task, "path": added.path}
                for added in orders
            ],
        }
    )


def _check_orders(
    children: Sequence[Mapping[str, Any]],
    closures: Mapping[str, list[str]],
    intents: Mapping[str, IntentReading],
) -> tuple[CheckOrder, ...]:
    """The orders ownership of named paths adds between enrollable tasks (issue 58)."""
    valid = {
        child["task_id"]: reading.intent
        for child in children
        if child["status"] == "enrollable"
        and isinstance(reading := intents.get(child["task_id"]), ValidIntent)
    }
    if len(valid) < 2:
        return ()
    plan_order = [child["task_id"] for child in children if child["task_id"] in valid]
    return check_orders(plan_order, closures, intent_conflicts(valid))


def _check_options(options: PlanOptions) -> None:
    if not 1 <= options.max_parallel <= MAX_PARALLEL_LIMIT:
        raise PlanInputError(
            f"max_parallel must be between 1 and {MAX_PARALLEL_LIMIT} "
            f"(at most {MAX_PARALLEL_LIMIT} lanes per run), got {options.max_parallel}"
        )
    if options.qa_failure_limit < 1:
        raise PlanInputError(f"qa_failure_limit must be at least 1, got {options.qa_failure_limit}")


def _classify(
    order: Sequence[str],
    tasks: Mapping[str, InitiativeTask],
    closures: Mapping[str, list[str]],
    intents: Mapping[str, IntentReading],
    integrated_before: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Each task's plan child (field order as PlanChild), classified in plan order."""
    status: dict[str, ChildStatus] = {}
    children: list[dict[str, Any]] = []
    for task_id in order:
        task = tasks[task_id]
        reading = intents.get(task_id, InvalidIntent("intent file is missing"))
        state, reason = _status_of(task, reading, integrated_before, status)
        status[task_id] = state
        valid = reading if isinstance(reading, ValidIntent) else None
        children.append(
            {
                "task_id": task_id,
                "slice_id": task.slice_id,
                "blocked_by": closures[task_id],
                "status": state,
                "reason": reason,
                "intent_path": intent_path(task_id),
                "intent_revision": valid.intent.revision if valid else None,
                "intent_content_hash": valid.content_hash if valid else None,
            }
        )
    return children


def _status_of(
    task: InitiativeTask,
    reading: IntentReading,
    integrated_before: Mapping[str, str],
    known: Mapping[str, ChildStatus],
) -> tuple[ChildStatus, str | None]:
    if isinstance(reading, InvalidIntent):
        return "needs_human", f"{REASON_INVALID_INTENT}: {reading.why}"
    if reading.intent.risk == "critical":
        return "needs_human", REASON_CRITICAL
    if task.task_id in integrated_before:
        return "already_settled", f"{SETTLED_BY}{integrated_before[task.task_id]}"
    if any(known[need] not in ("enrollable", "already_settled") for need in task.blocked_by):
        return "blocked", REASON_DEPENDENCY_UNAVAILABLE
    return "enrollable", None


def _budget(options: PlanOptions, enrollable: int) -> dict[str, int]:
    # A budget above the enrollable count means all of them: the config's one value serves
    # initiatives of every size (the reference refuses it; ADR 0041).
    if options.max_children is not None and options.max_children < 1:
        raise PlanInputError(f"max_children must be at least 1, got {options.max_children}")
    wanted = enrollable if options.max_children is None else options.max_children
    return {"max_children": min(wanted, enrollable), "qa_failure_limit": options.qa_failure_limit}


def _schedule_view(
    enrollable: Sequence[dict[str, Any]],
    intents: Mapping[str, IntentReading],
    orders: Sequence[CheckOrder] = (),
) -> list[ScheduleChild]:
    # Settled and excluded dependencies never get placed in a wave; only enrollable ones order
    # the waves (an already settled dependency is done). The orders ownership adds order them
    # too: the waves show when a task can run.
    ids = {child["task_id"] for child in enrollable}
    after = runs_after(orders)
    view = []
    for child in enrollable:
        reading = intents[child["task_id"]]
        if not isinstance(reading, ValidIntent):  # _classify enrolls only valid intents
            raise RuntimeError(f"{child['task_id']} is enrollable without a valid intent")
        view.append(
            ScheduleChild(
                task_id=child["task_id"],
                blocked_by=tuple(
                    need
                    for need in [*child["blocked_by"], *after.get(child["task_id"], ())]
                    if need in ids
                ),
                scope_hint=tuple(reading.intent.scope_hint),
            )
        )
    return view


def plan_digest(enrollable: Sequence[Mapping[str, Any]]) -> str:
    """SPEC §4.1: SHA-256 over the compact, key-sorted JSON of the enrollable list
    (`{task_id, intent_path, intent_revision, intent_content_hash, blocked_by}` in plan order)."""
    return sha256_digest(
        json.dumps(list(enrollable), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )
