"""Batch plan `imm_action/batch_plan/v1` (SPEC §4.5)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from imm_action.model.common import Digest, Identifier, StrictModel
from imm_action.model.initiative import Carrier

PLAN_CONTRACT: Final = "imm_action/batch_plan/v1"
MAX_PARALLEL_LIMIT = 256
DEFAULT_QA_FAILURE_LIMIT = 2

ChildStatus = Literal["enrollable", "needs_human", "blocked", "already_settled"]


class PlanChild(StrictModel):
    task_id: Identifier
    slice_id: Identifier
    blocked_by: list[Identifier] = Field(description="Transitive closure of dependencies, sorted.")
    status: ChildStatus
    reason: str | None
    intent_path: str
    intent_revision: int | None
    intent_content_hash: Digest | None


class EnrollableChild(StrictModel):
    task_id: Identifier
    intent_path: str
    intent_revision: Annotated[int, Field(ge=1)]
    intent_content_hash: Digest
    blocked_by: list[Identifier]


class ExcludedChild(StrictModel):
    task_id: Identifier
    slice_id: Identifier
    reason: str


class Budget(StrictModel):
    max_children: Annotated[int, Field(ge=0)]
    qa_failure_limit: Annotated[int, Field(ge=1)] = DEFAULT_QA_FAILURE_LIMIT


class ScopeConflict(StrictModel):
    task_id: Identifier
    overlaps_with: list[Identifier]


class PlanCheckOrder(StrictModel):
    """An order the plan added (issue 58): `task_id` runs after `after`, whose scope covers
    `path`, which `task_id`'s check names — so `after` may build what `task_id` tests. It
    starts once `after` has ended, landed or parked."""

    task_id: Identifier
    after: Identifier
    path: str


class BatchPlan(StrictModel):
    contract: Literal["imm_action/batch_plan/v1"]
    initiative: Identifier
    carrier: Carrier
    order: list[Identifier]
    children: list[PlanChild]
    enrollable: list[EnrollableChild]
    excluded: list[ExcludedChild]
    budget: Budget
    max_parallel: Annotated[int, Field(ge=1, le=MAX_PARALLEL_LIMIT)]
    parallel_groups: list[list[Identifier]]
    scope_conflicts: list[ScopeConflict]
    plan_digest: Digest
    check_orders: list[PlanCheckOrder] = Field(
        default_factory=list,
        description="Orders the plan added so that a task whose scope covers a path another "
        "task's check names runs before it: `task_id` starts once `after` has ended (landed "
        "or parked); not a dependency.",
    )

    def runs_after(self) -> dict[str, list[str]]:
        """Each task the plan orders after others (`check_orders`), with those others."""
        found: dict[str, list[str]] = {}
        for order in self.check_orders:
            found.setdefault(order.task_id, []).append(order.after)
        return found
