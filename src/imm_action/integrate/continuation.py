"""What happens to a batch that stopped (SPEC §5.7), as pure decisions.

A batch that stopped — `needs_human` with nothing in flight, `budget_stopped` or `cancelled` —
continues after a fix in a *continuation batch* on the same branch: every task it integrated
stays done with its commit, the base branch's new commits are merged in first, and the rest is
planned again from the committed files. `--fresh` instead archives the branch and starts over
from the base. Which of these a pass may do is the request's (`Stopped`); whether the latest
batch stopped is the world's (`StoppedFacts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from imm_action.model.intent import intent_path
from imm_action.model.plan import BatchPlan
from imm_action.model.state import BatchChild, BatchRunState, BatchState, ChildState

ARCHIVE = "refs/imm/archive/"
REASON_CONTINUED = "continued by"


def archive_ref(batch_id: str) -> str:
    """Where `--fresh` keeps the branch of the batch it replaces; never deleted silently."""
    return f"{ARCHIVE}{batch_id}"


class Stopped(StrEnum):
    """What a pass that names no batch does with the slug's latest batch when it stopped."""

    RESUME = "resume"  # load it as it is (GitHub passes, `imm status`)
    CONTINUE = "continue"  # continue it (`imm run`, `/imm run`, the dispatched workflow)
    CONTINUE_IF_PLAN_CHANGED = "continue_if_plan_changed"  # `imm retry` after a committed fix
    FRESH = "fresh"  # archive its branch and start from the base (`imm run --fresh`)


@dataclass(frozen=True)
class StoppedFacts:
    latest: BatchRunState | None  # the newest batch of the slug
    branch_head: str | None  # `imm/<slug>` now
    plan_digest: str  # of the plan the pass computed from the committed files
    branch_holds_latest: bool  # the branch still contains every commit the latest recorded


@dataclass(frozen=True)
class Continue:
    """Start a continuation of `batch_id` from the branch head `branch_head`."""

    batch_id: str
    branch_head: str


@dataclass(frozen=True)
class Fresh:
    """Archive the branch (when there is one) under the latest batch's id and start anew;
    `supersede` is a live batch that is cancelled in the same write."""

    branch_head: str | None
    archive_as: str | None
    supersede: str | None


@dataclass(frozen=True)
class CannotContinue:
    message: str


StoppedDecision = Continue | Fresh | CannotContinue | None  # None: the usual start or resume


def has_stopped(state: BatchRunState) -> bool:
    """Stopped and waiting for a person: nothing in flight, and not completed or failed."""
    match state.batch_state:
        case BatchState.BUDGET_STOPPED | BatchState.CANCELLED:
            return True
        case BatchState.NEEDS_HUMAN:
            return not any(child.state.in_flight for child in state.children)
        case (
            BatchState.PREPARED
            | BatchState.RUNNING
            | BatchState.COMPLETED
            | BatchState.FAILED
            | BatchState.REJECTED
        ):
            return False


def decide_stopped(stopped: Stopped, facts: StoppedFacts) -> StoppedDecision:
    latest = facts.latest
    if stopped is Stopped.FRESH:
        live = latest if latest is not None and not latest.batch_state.is_terminal else None
        return Fresh(
            branch_head=facts.branch_head,
            archive_as=latest.batch_id if latest and facts.branch_head else None,
            supersede=live.batch_id if live else None,
        )
    if latest is None or stopped is Stopped.RESUME:
        return None
    # A batch whose plan changed stops where it is: its lanes still in flight work to the old
    # plan, and no pass of it goes on (decide_batch), so waiting for them would wait forever.
    replanned = (
        latest.batch_state is BatchState.NEEDS_HUMAN and latest.plan_digest != facts.plan_digest
    )
    if not (has_stopped(latest) or replanned):
        return None
    if stopped is Stopped.CONTINUE_IF_PLAN_CHANGED and latest.plan_digest == facts.plan_digest:
        return None
    if facts.branch_head is None or not facts.branch_holds_latest:
        return CannotContinue(
            f"{latest.branch} no longer holds the work of {latest.batch_id}, so it cannot be "
            f"continued; restore the branch, or start afresh with --fresh"
        )
    return Continue(latest.batch_id, facts.branch_head)


def continued_children(
    plan: BatchPlan, stopped: BatchRunState, retry: str | None = None
) -> list[BatchChild]:
    """The continuation's children, in plan order: what the stopped batch integrated stays
    integrated with its commit; the rest is pending again — or, for `imm retry <task>`, only
    that task, the dependents it skipped and tasks new to the plan, the other parked ones
    staying parked."""
    enrollable = {child.task_id for child in plan.enrollable}
    before = {child.task_id: child for child in stopped.children}
    runs_after = plan.runs_after()
    children = []
    for planned in plan.children:
        if planned.task_id not in enrollable:
            continue
        blocked_by = [need for need in planned.blocked_by if need in enrollable]
        after = runs_after.get(planned.task_id)
        old = before.get(planned.task_id)
        if old is not None and (old.state.done or not _runs_again(old, retry)):
            kept = old.model_copy(update={"blocked_by": blocked_by, "slice_id": planned.slice_id,
                                          "after": after})  # fmt: skip
            children.append(kept if old.state.done else _at_rest(kept))
            continue
        children.append(BatchChild.pending(planned.task_id, planned.slice_id, blocked_by, after))
    return children


def kept_commits(stopped: BatchRunState, children: Sequence[BatchChild]) -> list[str]:
    """The commits of the kept children, in the order the stopped batch integrated them."""
    kept = {child.commit for child in children if child.commit}
    return [commit for commit in stopped.commits if commit in kept]


def _runs_again(child: BatchChild, retry: str | None) -> bool:
    if retry is None or child.task_id == retry:
        return True
    return (
        child.state is ChildState.SKIPPED_BLOCKED and child.reason == f"dependency {retry} parked"
    )


def _at_rest(child: BatchChild) -> BatchChild:
    """A parked or skipped child carried over as it was, holding no lane of the old batch."""
    return child.model_copy(update={"lane": None})


def changed_intents(changed_paths: Sequence[str], task_ids: Sequence[str]) -> list[str]:
    """The tasks whose intent file differs between the stopped batch's base and the new one."""
    changed = set(changed_paths)
    return [task for task in task_ids if intent_path(task) in changed]
