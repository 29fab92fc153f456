"""Pure: what the batch state is after a pass (SPEC §5.2 step 7), and what to tell a person."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from imm_action.costs import money
from imm_action.integrate.reasons import (
    BASE_CHECK_FAILED,
    HEAD_CHECK_FAILED,
    LINEAGE_BROKEN,
    NO_BRANCH_CHECKS,
    OPEN_LANE_NETWORK,
    PLAN_CHANGED,
)
from imm_action.integrate.spend import batch_spend, cost_budget_used, cost_line, line_spend
from imm_action.integrate.transitions import admissions_used, child_of, run_cancelled
from imm_action.model.intent import intent_path
from imm_action.model.refs import batch_branch
from imm_action.model.report import REPORT_CONTRACT, BatchRunReport, ReportChild
from imm_action.model.state import (
    BatchChild,
    BatchRunState,
    BatchState,
    BranchVerdict,
    ChildState,
    QuarantinedHead,
    flaky_said,
)
from imm_action.plan.lane_change import TOUCHES_CHECK
from imm_action.text import listed, plural

# What differs between a check's run in imm and the user's own (issue 59 #6: checks passed on
# main in the user's shell, and nothing said why they failed in imm), and how to provide it.
WHERE_CHECKS_RUN = (
    "Where they pass for you but not here, what differs is where imm runs them: in its "
    "sandbox, with a home of their own (not yours: a tool under your home is seen only as "
    "docs/formats.md's toolchains list it, or through `sandbox_expose`), no variable of yours "
    "but PATH, and the network only if `check_network` allows it; `check_setup` prepares "
    "what they need"
)


@dataclass(frozen=True)
class Verdict:
    batch_state: BatchState
    reason: str
    next_action: str


def verdict(state: BatchRunState, startable: Sequence[str]) -> Verdict:
    """SPEC §5.2 step 7. Terminal states stay as they are."""
    if state.batch_state.is_terminal:
        return _terminal_verdict(state)
    children = state.children
    done = sum(1 for child in children if child.state.done)
    branch = batch_branch(state.initiative_slug)
    if run_cancelled(state):
        return Verdict(
            BatchState.CANCELLED,
            f"{state.stop_reason}; {done} of {plural(len(children), 'task')} integrated",
            "continue the batch when ready (`/imm run`, or dispatch imm-batch): what finished "
            "stays, the cancelled lanes run again",
        )
    if state.stop_reason and state.stop_reason.startswith(BASE_CHECK_FAILED):
        return Verdict(
            BatchState.NEEDS_HUMAN,
            state.stop_reason,
            f"no lane ran: fix what fails the named branch checks on {state.base_ref} (run them "
            "there yourself), commit the fix, then run the batch again: it starts from the fixed "
            f"base. {WHERE_CHECKS_RUN}",
        )
    if state.stop_reason and state.stop_reason.startswith(HEAD_CHECK_FAILED):
        return Verdict(
            BatchState.NEEDS_HUMAN,
            state.stop_reason,
            f"run the named checks on {branch} yourself; fix what fails them (a flaky test, "
            "the environment), then continue the batch: its ready lanes are verified again. "
            f"{WHERE_CHECKS_RUN}",
        )
    if done == len(children):
        verified = head_checks_said(state, done)
        return Verdict(
            BatchState.COMPLETED,
            (
                f"all {plural(done, 'task')} integrated into {branch}"
                if done != 1
                else f"the task is integrated into {branch}"
            )
            + verified,
            f"review {branch} and merge it into {state.base_ref}",
        )
    in_flight = [child.task_id for child in children if child.state.in_flight]
    if in_flight or startable:
        # With nothing in flight no process works for the batch (after `imm retry`, or a
        # run that ended): say so, not that lanes are about to start (issue 41 #3).
        waiting = (
            f"{plural(len(in_flight), 'lane')} in flight"
            if in_flight
            else f"no lane is at work; {plural(len(startable), 'task')} can start"
        )
        return Verdict(
            BatchState.RUNNING,
            f"{done} of {plural(len(children), 'task')} integrated; {waiting}",
            "wait for the running lanes" if in_flight else "run the batch to start its lanes",
        )
    parked = [child for child in children if child.state is ChildState.NEEDS_HUMAN]
    if parked:
        first, others = parked[0], [child.task_id for child in parked[1:]]
        # every parked task named (issue 41 #7), the first one's reason in full
        also = f"; also parked: {', '.join(others)}" if others else ""
        return Verdict(
            BatchState.NEEDS_HUMAN,
            f"task {first.task_id} needs a person: {first.reason}{also}",
            _parked_action(parked),
        )
    pending = [child for child in children if child.state is ChildState.PENDING]
    if pending and cost_budget_used(state):
        return Verdict(BatchState.BUDGET_STOPPED, cost_stop_reason(state, len(pending)),
                       COST_STOP_ACTION)  # fmt: skip
    if pending and admissions_used(state) >= state.budget.max_children:
        return Verdict(
            BatchState.BUDGET_STOPPED,
            f"the budget of {plural(state.budget.max_children, 'child', 'children')} is "
            f"used; {len(pending)} {'waits' if len(pending) == 1 else 'wait'}",
            "continue the batch to run the remaining tasks",
        )
    return Verdict(
        BatchState.NEEDS_HUMAN,
        "no child can start",
        "check the skipped tasks' dependencies, then continue the batch",
    )


def _parked_action(parked: Sequence[BatchChild]) -> str:
    """What gets parked tasks moving: a change another task's check names, or tests that no
    longer pass, would be refused again on a retry as it is; any other failure may not be."""
    touched = [c.task_id for c in parked if (c.reason or "").startswith(TOUCHES_CHECK)]
    if touched:
        return (
            f"{listed(touched)} changed a path another task's check names "
            f"({TOUCHES_CHECK}), which a retry as it is would change again: narrow "
            f"{'its' if len(touched) == 1 else 'their'} scope_hint to leave the path out, "
            "or make the owner's check not name it; commit, then continue the batch"
        )
    outside = [c for c in parked if c.failing_outside_scope]
    if outside:
        return _outside_scope_action(outside, [c for c in parked if not c.failing_outside_scope])
    lost = [c.task_id for c in parked
            if any(f.lost_tests and f.exit_code == 0 for f in c.failures)]  # fmt: skip
    if lost:
        where = ", ".join(intent_path(task) for task in lost)
        return (
            f"{listed(lost)} removed, skipped or deselected tests that pass on the batch "
            "branch (named above): where that is meant (a renamed or retired test), list them "
            f"under `retires_tests` in {where} and commit; else fix the cause and commit; "
            "then continue the batch (parked tasks run again)"
        )
    return (
        "fix the cause and commit the fix, then continue the batch (parked tasks run again); "
        "or retry one task as it is"
    )


def _outside_scope_action(outside: Sequence[BatchChild], others: Sequence[BatchChild]) -> str:
    """Issue 62 #3: a retry as it is was offered where its lane may not change what fails."""
    said = "; ".join(
        f"{c.task_id}'s failing tests ({listed(c.failing_outside_scope or [])}) lie outside "
        f"its scope_hint ({intent_path(c.task_id)})"
        for c in outside
    )
    rest = f"; retry {listed([c.task_id for c in others])} as it is" if others else ""
    return (
        f"{said}: its lane may not change them, so a retry as it is cannot pass them — widen "
        "the scope_hint to cover them, or have the task keep the behaviour they test; commit, "
        f"then continue the batch{rest}"
    )


def quarantine_line(state: BatchRunState, kept: QuarantinedHead) -> str:
    """What became of a refused push, and how to bring its commit in (issue 42 #4)."""
    return (
        f"quarantined: {kept.foreign} (pushed onto {state.branch} outside imm) is kept as "
        f"{kept.ref}; {state.branch} went back to {kept.restored[:12]}. To bring it in, "
        f"merge it into {state.base_ref} (a continuation of a stopped batch merges "
        f"{state.base_ref} in; otherwise it meets the batch's work when {state.branch} is "
        "merged), or make its change a task"
    )


def head_checks_said(state: BatchRunState, done: int) -> str:
    """What was verified on the head, exactly: the checks that ran there, and apart those a
    declared `reads` carried over from another tree (issue 42 #5)."""
    if not state.head_checks:
        return ""
    carried = min(state.head_checks_carried or 0, state.head_checks)
    ran = state.head_checks - carried
    whose = f"of {'them' if done != 1 else 'it'}"
    gated = {
        None: "",
        "all": " (held_checks: all, with the branch checks)",
        "branch": " (held_checks: branch: the branch checks, and each lane's own on its move)",
    }[state.held_checks]
    if not carried:
        return (
            f"; every check {whose} ({plural(state.head_checks, 'check')}) passed on its "
            f"head{gated}"
        )
    return (
        f"; every check {whose} passed: {plural(ran, 'check')} on its head, {carried} carried "
        f"over by their declared reads{gated}"
    )


def plan_changed_verdict(state: BatchRunState) -> Verdict:
    """A resumed batch whose plan digest no longer matches: nothing is parked silently; the
    batch waits for a person to start it anew."""
    return Verdict(
        BatchState.NEEDS_HUMAN,
        f"{PLAN_CHANGED}: the initiative or an intent changed since the batch started",
        "continue the batch with the changed plan (tasks already integrated stay)",
    )


COST_STOP_ACTION = (
    "raise max_cost_usd in .github/imm.yml (or pass `imm run --max-cost-usd`), then continue "
    "the batch: what it spent so far counts"
)


def cost_stop_reason(state: BatchRunState, waiting: int) -> str:
    """`max_cost_usd` reached: what was spent of it, and how many tasks wait (issue 45)."""
    limit = state.budget.max_cost_usd or 0.0
    spent = line_spend(state).cost_usd
    return (
        f"the cost budget is used: {money(spent)} spent of max_cost_usd {money(limit)}; "
        f"{waiting} {'task waits' if waiting == 1 else 'tasks wait'}"
    )


def _terminal_verdict(state: BatchRunState) -> Verdict:
    branch = batch_branch(state.initiative_slug)
    pending = sum(1 for child in state.children if child.state is ChildState.PENDING)
    texts = {
        BatchState.COMPLETED: ("all tasks are integrated", f"review {branch} and merge it"),
        BatchState.CANCELLED: (
            state.stop_reason or "the batch was cancelled",
            f"continue the batch when ready, or start afresh from {state.base_ref}",
        ),
        BatchState.FAILED: (
            state.stop_reason or _first_reason(state, "the batch failed"),
            f"start afresh from {state.base_ref} ({branch} is archived first)",
        ),
        BatchState.BUDGET_STOPPED: (
            (cost_stop_reason(state, pending), COST_STOP_ACTION)
            if cost_budget_used(state)
            else ("the budget is used", "continue the batch to run the remaining tasks")
        ),
        BatchState.REJECTED: (
            "the batch was rejected",
            f"fix the plan, then start afresh from {state.base_ref}",
        ),
    }
    reason, action = texts.get(state.batch_state, ("", ""))
    return Verdict(state.batch_state, reason, action)


def _first_reason(state: BatchRunState, default: str) -> str:
    for child in state.children:
        if child.reason and child.reason.startswith(LINEAGE_BROKEN):
            return child.reason
    return default


def child_reason(state: BatchRunState, task_id: str) -> str | None:
    """Why a child that is not done is where it is (every such child carries one)."""
    return _reason(child_of(state, task_id), {c.task_id for c in state.children if c.state.done})


def _reason(child: BatchChild, done: AbstractSet[str]) -> str | None:
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
            waiting = [need for need in child.blocked_by if need not in done]
            ordered = [first for first in child.after or () if first not in done]
            if ordered and not waiting:  # it may start once they ended, landed or parked
                return f"runs after {', '.join(ordered)} (check_orders)"
            return f"waiting for {', '.join(waiting)}" if waiting else "waiting for a lane"


def report_children(state: BatchRunState) -> list[ReportChild]:
    """Every child as the report shows it: one pass over the children (linear in N). A child
    object unchanged since the last report, with the same reason, gives the same report child
    (states change by `model_copy`, which keeps the children it did not change): a pass that
    moves two children of a thousand builds two."""
    global _LAST_CHILDREN  # noqa: PLW0603 - a memo of the last report, by child identity
    done = {c.task_id for c in state.children if c.state.done}
    last = _LAST_CHILDREN
    made: dict[int, tuple[BatchChild, str | None, ReportChild]] = {}
    children: list[ReportChild] = []
    for child in state.children:
        reason = _reason(child, done)
        earlier = last.get(id(child))
        if earlier is not None and earlier[0] is child and earlier[1] == reason:
            shown = earlier[2]
        else:
            shown = ReportChild.model_construct(
                task_id=child.task_id,
                state=child.state,
                reason=reason,
                commit=child.commit,
                lane_branch=child.lane.branch if child.lane else None,
                attempts=child.attempts,
                qa_failures=child.qa_failures,
                failures=list(child.failures),
                spend=child.spend,
                failing_outside_scope=child.failing_outside_scope,
            )
        made[id(child)] = (child, reason, shown)
        children.append(shown)
    _LAST_CHILDREN = made
    return children


_LAST_CHILDREN: dict[int, tuple[BatchChild, str | None, ReportChild]] = {}


def build_report(state: BatchRunState, verdict: Verdict, now: str) -> BatchRunReport:
    spend = batch_spend(state)
    return BatchRunReport(
        contract=REPORT_CONTRACT,
        batch_id=state.batch_id,
        initiative_slug=state.initiative_slug,
        batch_state=verdict.batch_state,
        max_parallel=state.max_parallel,
        children=report_children(state),
        commits=list(state.commits),
        reason=verdict.reason,
        next_action=verdict.next_action,
        lanes_started=admissions_used(state) + sum(child.attempts for child in state.children),
        created_at=now,
        continues=state.continues,
        adopted=[f"adopted: {a.to} (pushed outside imm, unverified)" for a in state.adopted_heads],
        quarantined=[quarantine_line(state, kept) for kept in state.quarantined],
        unconfined=[
            why
            if why == OPEN_LANE_NETWORK or why.startswith("refused: ")
            else f"lane code ran unconfined: {why}"
            for why in state.unconfined
        ],
        branch_checks=[branch_verdict_line(state, verdict) for verdict in state.branch_verdicts]
        or [NO_BRANCH_CHECKS],
        branch_failures=[verdict.failure for verdict in state.branch_verdicts if verdict.failure],
        spend=spend if spend.runs else None,
        cost=cost_line(state),
        retired=[
            f"{child.task_id} retired {', '.join(child.retired_tests)}"
            for child in state.children
            if child.retired_tests and child.state.done
        ],
        flaky=[f"flaky test {test}: {said}" for test, said in flaky_said(state)],
    )


def branch_verdict_line(state: BatchRunState, verdict: BranchVerdict) -> str:
    said = {True: "passed", False: "FAILED", None: "not run yet"}[verdict.passed]
    return f"branch check {verdict.check_id}: {said} on {state.branch} at {verdict.head[:12]}"
