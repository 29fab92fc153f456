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

from imm_action.git.candidate import (
    Candidate,
    ChangeNotCarried,
    LaneBaseNotInHead,
    LaneParentsWrong,
    MergeBaseForeign,
    MergeConflicts,
)
from imm_action.integrate import transitions as t
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFound,
    ChecksMissing,
    HeadFacts,
    LaneFacts,
    PassFacts,
    StartFacts,
)
from imm_action.integrate.reasons import (
    CHECK_FAILED,
    CONFLICT,
    HEAD_CHECK_FAILED,
    LANE_NEEDS_PERSON,
    LINEAGE_BROKEN,
    OUTCOME_MISMATCH,
    PARALLEL_MISMATCH,
    RUN_CANCELLED,
)
from imm_action.integrate.spend import cost_budget_used, with_spend
from imm_action.lanes.runners import (
    FinishedWithOutcome,
    FinishedWithoutOutcome,
    JobFound,
    Orphaned,
    Running,
)
from imm_action.model.outcome import CheckResult, Failure, carries_trailer
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
from imm_action.plan.lane_change import lane_change_refusal
from imm_action.plan.schedule import AdmissionLimits, CandidateChild, startable
from imm_action.text import listed
from imm_action.verify.checks import Check
from imm_action.verify.failures import check_failures

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
class Park:
    task_id: str
    reason: str
    failures: tuple[Failure, ...] = ()  # the failed commands behind the reason


@dataclass(frozen=True)
class Land:
    """Move the batch branch from `head` to `commit`, recording the integration."""

    task_id: str
    commit: str
    head: str


Landing = Park | Land


@dataclass(frozen=True)
class LandingDecision:
    """One round of step 5: what to do, in order, and whether another round may land more."""

    steps: tuple[Landing, ...] = ()
    again: bool = False


@dataclass(frozen=True)
class Admit:
    task_id: str
    base_head: str


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
            state = with_spend(state, child.task_id, spend_of_runs(outcome.agent_runs))
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
                state = with_spend(state, child.task_id, LOST_SPEND)
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


# -- step 5: integration ------------------------------------------------------------------------
def ready_to_integrate(state: BatchRunState) -> list[BatchChild]:
    """Lane-committed children, in plan order."""
    return [c for c in state.children if c.state is ChildState.LANE_COMMITTED]


def decide_landings(head: str, chain: Sequence[CandidateFacts]) -> LandingDecision:
    """Land a verified stack (SPEC §5.4): the chain in plan order, each lane at its own
    candidate, when the top's tree passed every check of every lane — or, when checks failed,
    park the culprits the bisection found and the refused lanes below them; the rest is built
    again without them next round. A refused lane is parked and the chain goes on."""
    culprits = [index for index, entry in enumerate(chain) if _failed(entry)]
    if culprits:
        return _park_culprits(chain, culprits)
    steps: list[Landing] = []
    landed: list[CandidateFacts] = []
    for entry in chain:
        refusal = refusal_of(entry)
        if refusal is not None:
            steps.append(Park(entry.task_id, refusal))
            continue
        build = entry.build
        if not isinstance(build, Candidate):
            raise t.TransitionError(f"candidate of {entry.task_id} was neither built nor refused")
        if build.head != head or not _passed_whole(entry):
            break
        landed.append(entry)
        steps.append(Land(entry.task_id, build.commit, head))
        head = build.commit
    kept = _judged_by_the_top(landed)
    if len(kept) < len(landed):
        # refusals above the first lane that does not land were found against its candidate
        cut = steps.index(next(s for s in steps if s.task_id == landed[len(kept)].task_id))
        steps = steps[:cut]
    return LandingDecision(tuple(steps), again=bool(steps))


def landing_moves(landing: LandingDecision) -> bool:
    return any(isinstance(step, Land) for step in landing.steps)


def verified_on_top(chain: Sequence[CandidateFacts], landing: LandingDecision) -> tuple[int, int]:
    """How many distinct checks passed on the tree the branch moves to — the last landed
    lane's, which are those of every task the branch then holds (SPEC §5.4) — and how many of
    them were carried over by their declared `reads` rather than run on that tree."""
    last = [step.task_id for step in landing.steps if isinstance(step, Land)][-1]
    entry = next(entry for entry in chain if entry.task_id == last)
    checks = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
    carried = {
        check.digest
        for check, result in zip(checks, entry.results, strict=False)
        if result.carried_over
    }
    return len({check.digest for check in checks}), len(carried)


def head_failure_reason(branch: str, head: str, failed: Sequence[tuple[Check, CheckResult]]) -> str:
    """Why the batch waits when checks of tasks the branch holds fail on its head itself."""
    ids = [check.check_id for check, _ in failed]
    return (
        f"{HEAD_CHECK_FAILED}: {listed(ids)} failed twice on {branch} at {head[:12]} itself "
        "(flaky, or the environment changed); no lane is blamed"
    )


def _failed(entry: CandidateFacts) -> bool:
    return any(not result.passed for result in entry.results)


def _passed_whole(entry: CandidateFacts) -> bool:
    """Results for every check the lane is judged by, all passed."""
    if not isinstance(entry.checks, ChecksFound) or entry.judged_on is None:
        return False
    passed = {result.check_id for result in entry.results if result.passed}
    return all(check.check_id in passed for check in entry.checks.checks)


def _judged_by_the_top(landed: list[CandidateFacts]) -> list[CandidateFacts]:
    """The landed lanes up to the last whose tree is the one all of them were judged on: the
    batch branch moves only to a tree that passed every check of every lane it adds."""
    if not landed:
        return []
    judged = {entry.judged_on for entry in landed}
    if len(judged) != 1:
        return []
    (tree,) = judged
    last = max(
        (i for i, entry in enumerate(landed) if isinstance(entry.build, Candidate)
         and entry.build.tree == tree),
        default=-1,
    )  # fmt: skip
    return landed[: last + 1]


def _park_culprits(chain: Sequence[CandidateFacts], culprits: list[int]) -> LandingDecision:
    """The culprits, and the lanes refused below the first of them (those above it were
    refused against candidates that are built again)."""
    steps: list[Landing] = []
    for index, entry in enumerate(chain):
        if index in culprits:
            steps.append(_culprit_park(entry))
        elif index < culprits[0] and (refusal := refusal_of(entry)) is not None:
            steps.append(Park(entry.task_id, refusal))
    return LandingDecision(tuple(steps), again=True)


def _culprit_park(entry: CandidateFacts) -> Park:
    failed = [result.check_id for result in entry.results if not result.passed]
    commit = entry.build.commit if isinstance(entry.build, Candidate) else entry.lane_commit
    why = f"{CHECK_FAILED}: {', '.join(failed)} failed on candidate {commit}"
    own = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
    failures = tuple(check_failures((*own, *entry.also_checks), entry.results))
    return Park(entry.task_id, why, failures)


def refusal_of(entry: CandidateFacts) -> str | None:
    """Why this lane commit must not land (SPEC §5.4), or None when its candidate may be
    verified. The checks are only looked at for a built candidate."""
    lane_commit, base, head = entry.lane_commit, entry.lane_base, entry.built_on
    # the lane's own checks prove nothing: its change is checked again (SPEC §5.4)
    refused = lane_change_refusal(
        entry.change, entry.scope, entry.plan_paths, entry.tree_links,
        check_files=entry.check_files, task_id=entry.task_id,
    )  # fmt: skip
    if refused is not None:
        return refused
    match entry.build:
        case LaneParentsWrong(parents=parents) if len(parents) != 1:
            return (
                f"{LINEAGE_BROKEN}: lane commit {lane_commit} has {len(parents)} parents, "
                "expected exactly one"
            )
        case LaneParentsWrong():
            return (
                f"{LINEAGE_BROKEN}: lane commit {lane_commit} does not descend from lane base "
                f"{base}"
            )
        case LaneBaseNotInHead():
            return f"{LINEAGE_BROKEN}: lane base {base} is not an ancestor of batch head {head}"
        case MergeBaseForeign(bases=bases):
            return (
                f"{LINEAGE_BROKEN}: merge base of {head} and {lane_commit} is "
                f"{', '.join(bases) or 'none'}, not the lane base {base}"
            )
        case MergeConflicts(paths=paths):
            return (
                f"{CONFLICT}: lane commit {lane_commit} conflicts with batch head {head} in: "
                + listed(paths)
            )
        case ChangeNotCarried(commit=commit):
            return (
                f"{CONFLICT}: candidate {commit} does not carry exactly the change of lane "
                f"commit {lane_commit}"
            )
        case Candidate(commit=candidate):
            return _checks_refusal(entry, candidate)
        case unreachable:
            assert_never(unreachable)


def _checks_refusal(entry: CandidateFacts, candidate: str) -> str | None:
    match entry.checks:
        case ChecksFound(checks=checks) if checks:
            return None
        case ChecksFound() | None:
            return f"{CHECK_FAILED}: no descriptor to rerun on candidate {candidate}"
        case ChecksMissing(problem="none"):
            return f"{CHECK_FAILED}: no descriptor to rerun on candidate {candidate}"
        case ChecksMissing(task_id=task_id, problem="absent"):
            return f"{CHECK_FAILED}: intent of {task_id} is absent from candidate {candidate}"
        case ChecksMissing(task_id=task_id, detail=detail):
            return (
                f"{CHECK_FAILED}: intent of {task_id} is unreadable in candidate {candidate}: "
                f"{detail}"
            )
        case unreachable:
            assert_never(unreachable)


# -- step 6: admission ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AdmissionRules:
    scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    barrier_globs: tuple[str, ...] = ()
    in_flight_usd: float = 0.0  # what lanes at work spent so far, where the runner sees it


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
        )
        for c in state.children
    ]
    limits = AdmissionLimits(
        max_parallel=state.max_parallel,
        admissions_left=0
        if cost_budget_used(state, rules.in_flight_usd)
        else state.budget.max_children - t.admissions_used(state),
        barrier_globs=rules.barrier_globs,
    )
    return startable(view, limits)


def decide_admissions(state: BatchRunState, head: str, rules: AdmissionRules) -> tuple[Admit, ...]:
    """Each startable child, bound to the current batch head."""
    return tuple(Admit(task_id, head) for task_id in startable_children(state, rules))


def apply_landing(state: BatchRunState, step: Landing) -> BatchRunState:
    """The state after one landing step."""
    match step:
        case Park(task_id=task_id, reason=reason, failures=failures):
            return t.park(state, task_id, reason, failures=failures)
        case Land(task_id=task_id, commit=commit):
            return t.integrated(state, task_id, commit)
        case unreachable:
            assert_never(unreachable)


Mutation = Callable[[BatchRunState], BatchRunState]
