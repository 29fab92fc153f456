"""The decisions of a reconcile pass (SPEC §5.2, §5.4), as pure functions of the state and the
facts a pass observed. Nothing here reads git, a clock or the environment: every rule, its
order and every reason code is here, and the driver only carries the results out.

A pass decides in steps, because some facts exist only after earlier decisions:
1. `decide_start` — resume, start or refuse (step 1);
2. `decide_batch` — plan digest, lineage, crash-orphaned integrations, lanes (steps 1-4);
3. `decide_landings` — after candidates were built and verified (step 5), round by round;
4. `decide_admissions` and `verdict.verdict` — admission and the batch state (steps 6-7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from imm_action.integrate import transitions as t
from imm_action.integrate.facts import (
    HeadFacts,
    LaneFacts,
    PassFacts,
    StartFacts,
)
from imm_action.integrate.reasons import (
    LANE_NEEDS_PERSON,
    LINEAGE_BROKEN,
    OUTCOME_MISMATCH,
    PARALLEL_MISMATCH,
    RUN_CANCELLED,
)
from imm_action.integrate.spend import cost_budget_used
from imm_action.lanes.runners import (
    FinishedWithOutcome,
    FinishedWithoutOutcome,
    JobFound,
    Orphaned,
    Running,
)
from imm_action.model.outcome import carries_trailer
from imm_action.model.refs import quarantine_ref
from imm_action.model.spend import AgentSpend, spend_of_runs
from imm_action.model.state import (
    BatchChild,
    BatchRunState,
    BatchState,
    ChildState,
    GithubRunner,
    QuarantinedHead,
)
from imm_action.plan.schedule import AdmissionLimits, CandidateChild, startable
from imm_action.text import listed

# Git updates the refs of one transaction atomically for writers, but a reader can see some of
# them moved and others not yet. Whatever looks like a foreign branch or a broken lineage is
# therefore read again this many times before it is believed.
RECHECKS_BEFORE_BELIEVING = 3


# -- what the decisions are ------------------------------------------------------------------
@dataclass(frozen=True)
class Reread:
    """Read the refs afresh and decide again: what was seen may be another writer's
    transaction half-way."""

    why: str


@dataclass(frozen=True)
class Refuse:
    """A person must act first; nothing is written."""

    message: str


@dataclass(frozen=True)
class Resume:
    batch_id: str


@dataclass(frozen=True)
class Start:
    """Start a new batch; `reset_from` is the existing branch head it moves (None: create)."""

    reset_from: str | None


@dataclass(frozen=True)
class ReportAgain:
    """Everything is settled by earlier batches: report the last one again."""

    batch_id: str


StartDecision = Resume | Start | ReportAgain | Refuse | Reread


@dataclass(frozen=True)
class BatchDecision:
    """The state after steps 1-4, what to say about it, and whether the pass goes on to
    integrate and admit (`settled`: the batch is terminal, failed or waits for a new start)."""

    state: BatchRunState
    notes: tuple[str, ...] = ()
    settled: bool = False
    plan_changed: bool = False
    # a refused foreign head to keep aside (`quarantine` ref) while the branch is put back to
    # the last verified head, in the same write
    quarantine: Quarantine | None = None


@dataclass(frozen=True)
class Quarantine:
    foreign: str  # the head someone else moved the branch to
    ref: str  # where it is kept
    restored: str  # the last verified head the branch goes back to


@dataclass(frozen=True)
class Admit:
    task_id: str
    base_head: str
    # the committed dependencies whose changes its base must hold (a speculative lane)
    speculative_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class StartRules:
    """What the request says about starting (facts of the command line, not of the world)."""

    slug: str
    base_ref: str
    batch_branch: str
    may_start: bool
    enrollable: int
    active: str | None = None  # the newest live batch of the slug
    latest: str | None = None  # the newest batch of the slug


# -- step 1: start or resume -------------------------------------------------------------------
def decide_start(rules: StartRules, facts: StartFacts) -> StartDecision:
    """Step 1 for a pass that names no batch: resume the active one, report the last one again
    when everything is settled, or start — never over work on the branch that would be lost."""
    if rules.active is not None:
        return Resume(rules.active)
    if rules.latest is not None and facts.all_settled:
        return ReportAgain(rules.latest)
    if not rules.may_start:
        return Refuse(f"initiative {rules.slug} has no active batch")
    if rules.enrollable == 0:
        return Refuse(f"initiative {rules.slug}: nothing is enrollable, no batch started")
    existing = facts.branch_head
    if existing is not None and not facts.base_contains_branch:
        if facts.reads < RECHECKS_BEFORE_BELIEVING:
            return Reread("the batch branch exists without a batch")
        if facts.finished_on_branch is not None:
            batch, state = facts.finished_on_branch
            return Refuse(
                f"{rules.batch_branch} holds the work of batch {batch} ({state}), which is not "
                f"merged into {rules.base_ref}: merge {rules.batch_branch} into "
                f"{rules.base_ref} and run again, or start afresh from {rules.base_ref} "
                f"(the branch is kept under refs/imm/archive/): imm run {rules.slug} --fresh"
            )
        return Refuse(
            f"{rules.batch_branch} exists and holds work that is not in {rules.base_ref} and "
            "belongs to no finished batch; merge or delete it, then start again"
        )
    return Start(reset_from=existing)


def parallel_mismatch(state: BatchRunState, asked: int | None) -> str | None:
    """A live batch keeps the max_parallel it started with (the reference refuses a resume
    that asks for another): why a resume asking `asked` is refused, or None."""
    if asked is None or asked == state.max_parallel or state.batch_state.is_terminal:
        return None
    slug = state.initiative_slug
    return (
        f"{PARALLEL_MISMATCH}: batch {state.batch_id} runs with max_parallel "
        f"{state.max_parallel}, not {asked}; resume it without --max-parallel (or with "
        f"{state.max_parallel}), or cancel it (`imm cancel {slug}`) and run it again with "
        f"--max-parallel {asked}: the continuation keeps every integrated task"
    )


def all_settled(finished: Sequence[BatchRunState], enrollable: Sequence[str]) -> bool:
    """Whether completed batches already integrated every enrollable task."""
    settled = {
        child.task_id
        for batch in finished
        if batch.batch_state is BatchState.COMPLETED
        for child in batch.children
        if child.state.done
    }
    return all(task_id in settled for task_id in enrollable)


# -- steps 1-4: the batch, its lineage and its lanes ---------------------------------------------
def decide_batch(
    state: BatchRunState, plan_digest: str, facts: PassFacts
) -> BatchDecision | Reread:
    if state.batch_state.is_terminal:
        return BatchDecision(state, settled=True)
    if state.plan_digest != plan_digest:
        changed = state.model_copy(update={"batch_state": BatchState.NEEDS_HUMAN})
        return BatchDecision(changed, settled=True, plan_changed=True)
    lineage = decide_lineage(state, facts.head)
    if isinstance(lineage, str):
        if facts.reads < RECHECKS_BEFORE_BELIEVING:
            return Reread(lineage)
        head = facts.head
        if head.head is None:  # deleted: nothing to keep aside
            return BatchDecision(t.fail_lineage(state, lineage), settled=True)
        kept = Quarantine(head.head, quarantine_ref(state.batch_id, head.quarantined + 1),
                          head.recorded)  # fmt: skip
        # The batch goes on (issue 42 #4): lanes in flight were based on the verified head the
        # branch goes back to, and land as usual; the foreign head waits at its ref.
        record = QuarantinedHead(
            ref=kept.ref, foreign=kept.foreign, restored=kept.restored, reason=lineage
        )
        said = (
            f"{state.branch} moved outside imm ({lineage}): the foreign head is kept as "
            f"{kept.ref}, {state.branch} is put back to {kept.restored[:12]}, its last "
            "verified head, and the batch goes on"
        )
        state, lane_notes = decide_lanes(t.quarantine(state, record), facts.lanes)
        return BatchDecision(state, (said, *lane_notes), quarantine=kept)
    state, notes = lineage
    state, lane_notes = decide_lanes(state, facts.lanes)
    return BatchDecision(state, (*notes, *lane_notes))


def decide_lineage(
    state: BatchRunState, facts: HeadFacts
) -> tuple[BatchRunState, tuple[str, ...]] | str:
    """Step 2 and 3: the state with what was adopted, or why the lineage is broken."""
    expected = facts.recorded
    if facts.head is None:
        return f"{LINEAGE_BROKEN}: {state.branch} was deleted (expected {expected})"
    if facts.head == expected:
        return state, ()
    if not facts.contains_recorded:
        return (
            f"{LINEAGE_BROKEN}: {state.branch} moved to {facts.head}, which does not contain "
            f"the recorded head {expected}"
        )
    # Adoption is for people, and only when no lane of the batch could have made the move:
    # an executor can reach the user's repository (objects/info/alternates) and write any
    # commit there, with any author, the trailer or a copy of a lane's change included
    # (issue 21 #2). The branch and the state move in one transaction, so no crash of imm
    # leaves an integration unrecorded either: a move while lanes run stops the batch.
    running = [child.task_id for child in state.children if child.state.in_flight]
    first = facts.since_recorded[0].oid if facts.since_recorded else facts.head
    if running:
        return (
            f"{LINEAGE_BROKEN}: {state.branch} moved to {facts.head} (first commit {first}) "
            f"while lanes of the batch were running ({listed(running)}): a lane could have "
            "made it, so it is not adopted; check that commit, then start afresh or continue "
            "from a branch you trust"
        )
    for commit in facts.since_recorded:
        if carries_trailer(commit.message, state.batch_id):
            # only lanes and the integrator write this batch's trailer
            return (
                f"{LINEAGE_BROKEN}: {state.branch} moved to {facts.head}; lane-made commit "
                f"{commit.oid} is never adopted (it carries this batch's trailer, and the "
                "integrator did not record it)"
            )
    # Who pushed it is a name anyone can type: recorded as claimed, never shown as fact.
    by = facts.since_recorded[-1].committer if facts.since_recorded else None
    state = t.adopt_head(state, expected, facts.head, by or None)
    return state, (f"adopting {facts.head[:12]} pushed on top of {state.branch} (unverified)",)


# Children whose lane is at work: each holds one of `max_parallel` lane slots. A lane that
# ended with a commit frees its slot at once (its scope stays taken until it is integrated), so
# admission never waits for the integrator.
LANE_AT_WORK = frozenset({ChildState.LANE_ADMITTED, ChildState.SETTLED})


def waiting_lanes(state: BatchRunState) -> list[BatchChild]:
    """Children whose lane has not yet given a lane commit."""
    return [c for c in state.children if c.state in LANE_AT_WORK]


def decide_lanes(
    state: BatchRunState, lanes: Mapping[str, LaneFacts]
) -> tuple[BatchRunState, tuple[str, ...]]:
    """Step 4: outcomes move children on or park them; lost lanes go back to pending."""
    notes: list[str] = []
    for child in waiting_lanes(state):
        facts = lanes.get(child.task_id)
        if facts is None:
            continue
        outcome = facts.outcome
        if outcome is not None and outcome.attempt == child.attempts:
            # what its agent spent counts, whatever becomes of the lane (issue 45)
            state = t.spent(state, child.task_id, spend_of_runs(outcome.agent_runs))
            state = _take_outcome(state, child, facts)
            continue
        match facts.runner:
            case Running(job=job) | FinishedWithOutcome(job=job):
                state = _record_job(state, child, job)
            case FinishedWithoutOutcome(conclusion="cancelled", url=url):
                # GitHub's conclusion of a job whose run was cancelled (a timed-out job's is
                # `timed_out`): a person stopped the batch, no lane was lost
                run = _run_of(child)
                notes.append(f"lane {child.task_id}'s job was cancelled with workflow run {run}")
                why = f"{RUN_CANCELLED}: workflow run {run} was cancelled"
                state = t.lane_cancelled(state, child.task_id, why)
            case FinishedWithoutOutcome(conclusion=conclusion, url=url):
                notes.append(f"lane {child.task_id} ended without an outcome; admitting it again")
                state = t.spent(state, child.task_id, LOST_SPEND)
                state = t.lane_lost(state, child.task_id, _lost_why(conclusion, url))
            case Orphaned():
                state = t.lane_orphaned(state, child.task_id)
            case unreachable:
                assert_never(unreachable)
    return state, tuple(notes)


# A lane lost with its outcome: its agent ran, at a cost nobody can know.
LOST_SPEND = AgentSpend(runs=1, unknown=1, attempts=1)


def _run_of(child: BatchChild) -> str:
    runner = child.lane.runner if child.lane else None
    return str(runner.run_id) if isinstance(runner, GithubRunner) else "?"


def _lost_why(conclusion: str, url: str | None) -> str:
    if url is None:
        return f"the lane's runner ended without an outcome ({conclusion})"
    return f"lane job {url} ended without an outcome ({conclusion})"


def _record_job(state: BatchRunState, child: BatchChild, job: JobFound | None) -> BatchRunState:
    runner = child.lane.runner if child.lane else None
    if job is None or runner is None or runner.kind != "github" or runner.job_id == job.job_id:
        return state
    return t.record_job(state, child.task_id, job.job_id, job.name, job.url)


def _take_outcome(state: BatchRunState, child: BatchChild, facts: LaneFacts) -> BatchRunState:
    outcome = facts.outcome
    lane = child.lane
    if outcome is None or lane is None:
        raise t.TransitionError(f"{child.task_id} has no outcome to take")
    lane_commit, qa_failures = outcome.lane_commit, outcome.qa_failures
    if outcome.state != "settled" or lane_commit is None:
        reason = outcome.reason or LANE_NEEDS_PERSON
        return t.park(state, child.task_id, reason, qa_failures, outcome.failures)
    if facts.branch_head is not None and facts.branch_head != lane_commit:
        why = (
            f"{OUTCOME_MISMATCH}: the outcome names lane commit {lane_commit}, but "
            f"{lane.branch} is at {facts.branch_head}"
        )
        return t.park(state, child.task_id, why, qa_failures)
    parents = facts.lane_commit_parents or ()
    if parents != (lane.base_head,):
        why = (
            f"{LINEAGE_BROKEN}: lane commit {lane_commit} has parents "
            f"{', '.join(parents) or 'none'}, expected only the lane base {lane.base_head}"
        )
        return t.park(state, child.task_id, why, qa_failures)
    return t.lane_committed(state, child.task_id, lane_commit, qa_failures)


# -- step 6: admission ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AdmissionRules:
    scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    barrier_globs: tuple[str, ...] = ()
    in_flight_usd: float = 0.0  # what lanes at work spent so far, where the runner sees it
    speculate: bool = False  # `speculative_lanes` (issue 61)


def startable_children(state: BatchRunState, rules: AdmissionRules) -> list[str]:
    """The startable set (SPEC §5.2 step 6), in plan order."""
    if state.batch_state.is_terminal:
        return []
    view = [
        CandidateChild(
            task_id=c.task_id,
            blocked_by=tuple(c.blocked_by),
            scope_hint=rules.scopes.get(c.task_id, ()),
            pending=c.state is ChildState.PENDING,
            in_flight=c.state.in_flight,
            done=c.state.done,
            holds_lane=c.state in LANE_AT_WORK,
            after=tuple(c.after or ()),
            committed=c.state is ChildState.LANE_COMMITTED,
        )
        for c in state.children
    ]
    limits = AdmissionLimits(
        max_parallel=state.max_parallel,
        admissions_left=0
        if cost_budget_used(state, rules.in_flight_usd)
        else state.budget.max_children - t.admissions_used(state),
        barrier_globs=rules.barrier_globs,
        speculate=rules.speculate,
    )
    return startable(view, limits)


def decide_admissions(state: BatchRunState, head: str, rules: AdmissionRules) -> tuple[Admit, ...]:
    """Each startable child, bound to the current batch head — and, for one whose dependencies
    have committed but not landed (a speculative lane), to their lane commits on top of it."""
    committed = {c.task_id for c in state.children if c.state is ChildState.LANE_COMMITTED}
    needs = {c.task_id: c.blocked_by for c in state.children}
    order = [c.task_id for c in state.children]  # plan order: a dependency before its dependents
    return tuple(
        Admit(task_id, head, tuple(t for t in order if t in committed and t in needs[task_id]))
        for task_id in startable_children(state, rules)
    )


Mutation = Callable[[BatchRunState], BatchRunState]
