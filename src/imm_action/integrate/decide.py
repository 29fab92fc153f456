"""Pure decisions: what the batch state is after a pass, and what to tell a person."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from imm_action.integrate.refs import batch_branch
from imm_action.integrate.transitions import admissions_used
from imm_action.model.report import REPORT_CONTRACT, BatchRunReport, ReportChild
from imm_action.model.state import BatchRunState, BatchState, ChildState


@dataclass(frozen=True)
class Verdict:
    batch_state: BatchState
    reason: str
    next_action: str


def decide(state: BatchRunState, startable: Sequence[str]) -> Verdict:
    """SPEC §5.2 step 7. Terminal states stay as they are."""
    if state.batch_state.is_terminal:
        return _terminal_verdict(state)
    children = state.children
    done = sum(1 for child in children if child.state.done)
    branch = batch_branch(state.initiative_slug)
    if done == len(children):
        return Verdict(
            BatchState.COMPLETED,
            f"all {done} tasks are integrated into {branch}",
            f"review {branch} and merge it into {state.base_ref}",
        )
    in_flight = [child.task_id for child in children if child.state.in_flight]
    if in_flight or startable:
        count = len(in_flight)
        waiting = (
            f"{count} lane{'s' if count != 1 else ''} in flight"
            if in_flight
            else "lanes ready to start"
        )
        return Verdict(
            BatchState.RUNNING,
            f"{done} of {len(children)} tasks integrated; {waiting}",
            "wait for the running lanes" if in_flight else "start the admitted lanes",
        )
    parked = [child for child in children if child.state is ChildState.NEEDS_HUMAN]
    if parked:
        first = parked[0]
        return Verdict(
            BatchState.NEEDS_HUMAN,
            f"task {first.task_id} needs a person: {first.reason}",
            f"fix the cause, then run: imm retry {state.initiative_slug} {first.task_id}",
        )
    pending = [child for child in children if child.state is ChildState.PENDING]
    if pending and admissions_used(state) >= state.budget.max_children:
        return Verdict(
            BatchState.BUDGET_STOPPED,
            f"the budget of {state.budget.max_children} children is used; {len(pending)} wait",
            "start a new batch to run the remaining tasks",
        )
    return Verdict(
        BatchState.NEEDS_HUMAN,
        "no child can start",
        "check the skipped tasks' dependencies, then retry or start a new batch",
    )


PLAN_CHANGED = "batch_plan_changed"


def plan_changed_verdict(state: BatchRunState) -> Verdict:
    """A resumed batch whose plan digest no longer matches: nothing is parked silently; the
    batch waits for a person to start it anew."""
    return Verdict(
        BatchState.NEEDS_HUMAN,
        f"{PLAN_CHANGED}: the initiative or an intent changed since the batch started",
        f"cancel this batch (imm cancel {state.initiative_slug}) and start a new one",
    )


def _terminal_verdict(state: BatchRunState) -> Verdict:
    branch = batch_branch(state.initiative_slug)
    texts = {
        BatchState.COMPLETED: ("all tasks are integrated", f"review {branch} and merge it"),
        BatchState.CANCELLED: ("the batch was cancelled", "start a new batch when ready"),
        BatchState.FAILED: (
            _first_reason(state, "the batch failed"),
            f"restore {branch} or start a new batch",
        ),
        BatchState.BUDGET_STOPPED: ("the budget is used", "start a new batch"),
        BatchState.REJECTED: ("the batch was rejected", "fix the plan and start a new batch"),
    }
    reason, action = texts.get(state.batch_state, ("", ""))
    return Verdict(state.batch_state, reason, action)


def _first_reason(state: BatchRunState, default: str) -> str:
    for child in state.children:
        if child.reason and child.reason.startswith("batch_head_lineage_broken"):
            return child.reason
    return default


def child_reason(state: BatchRunState, task_id: str) -> str | None:
    """Why a child that is not done is where it is (every such child carries one)."""
    child = next(c for c in state.children if c.task_id == task_id)
    if child.state.done:
        return None
    if child.reason:
        return child.reason
    match child.state:
        case ChildState.LANE_ADMITTED:
            return "lane admitted; waiting for its outcome"
        case ChildState.SETTLED | ChildState.LANE_COMMITTED:
            return "lane committed; waiting for integration"
        case _:
            done = {c.task_id for c in state.children if c.state.done}
            waiting = [need for need in child.blocked_by if need not in done]
            return f"waiting for {', '.join(waiting)}" if waiting else "waiting for a lane"


def build_report(state: BatchRunState, verdict: Verdict, now: str) -> BatchRunReport:
    return BatchRunReport(
        contract=REPORT_CONTRACT,
        batch_id=state.batch_id,
        initiative_slug=state.initiative_slug,
        batch_state=verdict.batch_state,
        max_parallel=state.max_parallel,
        children=[
            ReportChild(
                task_id=child.task_id,
                state=child.state,
                reason=child_reason(state, child.task_id),
                commit=child.commit,
                lane_branch=child.lane.branch if child.lane else None,
                attempts=child.attempts,
                qa_failures=child.qa_failures,
            )
            for child in state.children
        ],
        commits=list(state.commits),
        reason=verdict.reason,
        next_action=verdict.next_action,
        lanes_started=admissions_used(state) + sum(child.attempts for child in state.children),
        created_at=now,
    )
