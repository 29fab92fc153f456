"""The reconcile pass (SPEC §5.2): load, lineage, adopt orphans, observe lanes, integrate,
admit, decide, report. Decisions come from the pure modules; this driver applies them through
the ref store, and every write is a compare-and-swap. A lost CAS re-runs the pass on fresh refs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from imm_action.errors import ImmError, UsageError
from imm_action.git.candidate import (
    CHECK_FAILED,
    LINEAGE_BROKEN,
    Candidate,
    IntegrationRefused,
    build_candidate,
    find_orphaned_integration,
)
from imm_action.git.errors import GitConflict
from imm_action.git.repo import RefUpdate
from imm_action.integrate import transitions as t
from imm_action.integrate.checks import candidate_checks
from imm_action.integrate.decide import Verdict, build_report, decide, plan_changed_verdict
from imm_action.integrate.refs import RefStore, batch_branch, heads, lane_branch, lane_outcome_ref
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.lanes.outcome import read_outcome
from imm_action.lanes.probe import LaneProbe, RunnerStatus
from imm_action.model.outcome import LaneOutcome
from imm_action.model.plan import BatchPlan
from imm_action.model.report import BatchRunReport
from imm_action.model.state import (
    STATE_CONTRACT,
    BatchChild,
    BatchRunState,
    BatchState,
    ChildState,
    Runner,
    StateBudget,
)
from imm_action.plan.schedule import AdmissionLimits, CandidateChild, startable
from imm_action.verify.checks import Check, ResultCache, TreeJob, Verifier
from imm_action.verify.failures import check_failures

MAX_LOST_RACES = 25
# Git updates the refs of one transaction atomically for writers, but a reader can see some of
# them moved and others not yet. Whatever looks like a foreign branch or a broken lineage is
# therefore read again this many times before it is believed.
RECHECKS_BEFORE_BELIEVING = 3


@dataclass(frozen=True)
class PassRequest:
    slug: str
    plan: BatchPlan
    scopes: Mapping[str, tuple[str, ...]]
    base_ref: str
    base_head: str
    authorized_by: str
    new_batch_id: str  # the id a batch started by this pass gets
    batch_id: str | None = None  # resume exactly this batch
    admit: bool = False
    start: bool = True  # may this pass start a new batch?
    barrier_globs: tuple[str, ...] = ()
    runner_for: Callable[[str], Runner] | None = None
    # A person's decision applied to the loaded state first (`imm retry`, `imm cancel`).
    mutate: Callable[[BatchRunState], BatchRunState] | None = None


@dataclass
class PassPorts:
    refs: RefStore
    probe: LaneProbe
    verifier: Callable[[ResultCache], Verifier]
    clock: Callable[[], str]
    log: Callable[[str], None] = field(default=lambda message: None)


@dataclass(frozen=True)
class PassResult:
    stored: StoredBatch
    admitted: tuple[str, ...]
    integrated: tuple[str, ...]
    races_lost: int


class GaveUpError(ImmError):
    """Too many lost races in a row: something else keeps moving the refs."""


def reconcile(request: PassRequest, ports: PassPorts) -> PassResult:
    """One pass, re-run from scratch whenever another writer moved a ref first."""
    results = ResultCache()  # survives lost races: a check already run is not run again
    for lost in range(MAX_LOST_RACES):
        ports.refs.refresh()
        try:
            outcome = _Pass(request, ports, results, lost).run()
        except GitConflict as race:
            detail = (race.stderr.strip().splitlines() or ["a ref moved"])[-1]
            ports.log(f"lost a race ({detail}); re-running the pass on fresh refs ({lost + 1})")
            time.sleep(random.uniform(0.005, 0.02 * (lost + 1)))
            continue
        return PassResult(outcome.stored, outcome.admitted, outcome.integrated, lost)
    raise GaveUpError(f"gave up after {MAX_LOST_RACES} lost races on the refs of {request.slug}")


@dataclass
class _Outcome:
    stored: StoredBatch
    admitted: tuple[str, ...] = ()
    integrated: tuple[str, ...] = ()


class _Pass:
    def __init__(
        self, request: PassRequest, ports: PassPorts, results: ResultCache, attempt: int = 0
    ) -> None:
        self.attempt = attempt
        self.request = request
        self.ports = ports
        self.repo = ports.refs.repo
        self.store = StateStore(ports.refs)
        self.results = results
        self.branch_ref = heads(batch_branch(request.slug))
        self.integrated: list[str] = []

    # -- the pass ------------------------------------------------------------------------
    def run(self) -> _Outcome:
        stored = self._load_or_start()
        for entry in stored.cache.entries:
            self.results.put(entry.tree, entry.descriptor_digest, entry.result)
        state = stored.state
        if self.request.mutate is not None:
            if state.batch_state.is_terminal:
                raise UsageError(
                    f"batch {state.batch_id} is {state.batch_state}; nothing to change"
                )
            state = self.request.mutate(state)
        if state.batch_state.is_terminal:
            return _Outcome(self._persist(stored, state, decide(state, [])))
        if state.plan_digest != self.request.plan.plan_digest:
            changed = state.model_copy(update={"batch_state": BatchState.NEEDS_HUMAN})
            return _Outcome(self._persist(stored, changed, plan_changed_verdict(changed)))
        head = self.ports.refs.read([self.branch_ref])[self.branch_ref]
        state, broken = self._lineage(state, head)
        if broken is not None:
            self._recheck(broken)
            failed = t.fail_lineage(state, broken)
            return _Outcome(self._persist(stored, failed, decide(failed, [])))
        assert head is not None
        state = self._observe_lanes(state)
        stored, state, head = self._integrate(stored, state, head)
        admitted: list[str] = []
        if self.request.admit:
            state, admitted = self._admit(state, head)
        stored = self._persist(stored, state, self._verdict(state))
        return _Outcome(stored, tuple(admitted), tuple(self.integrated))

    def _recheck(self, what: str) -> None:
        """Re-run the pass on fresh refs unless `what` was already seen on enough reads."""
        if self.attempt < RECHECKS_BEFORE_BELIEVING:
            raise GitConflict(["read refs"], None, f"{what}; reading the refs again")

    # -- step 1: load or start -------------------------------------------------------------
    def _load_or_start(self) -> StoredBatch:
        if self.request.batch_id is not None:
            found = self.store.load(self.request.batch_id)
            if found is None:
                raise UsageError(f"no batch {self.request.batch_id}")
            if found.state.initiative_slug != self.request.slug:
                raise UsageError(
                    f"batch {self.request.batch_id} belongs to {found.state.initiative_slug}"
                )
            return found
        # Read the branch before the batches: a batch is created with its branch in one CAS, so
        # a branch seen here means its batch is seen below (or the start loses the CAS).
        existing = self.ports.refs.read([self.branch_ref])[self.branch_ref]
        active = self.store.active(self.request.slug)
        if active is not None:
            return active
        earlier = self.store.batches_of(self.request.slug)
        if earlier and self._all_settled(earlier):
            return earlier[-1]  # everything is settled already: report the last batch again
        if not self.request.start:
            raise UsageError(f"initiative {self.request.slug} has no active batch")
        return self._start(existing)

    def _all_settled(self, batches: list[StoredBatch]) -> bool:
        """Whether completed batches already integrated every enrollable task (read fresh: the
        plan may predate a batch that completed while this pass was starting)."""
        settled = {
            child.task_id
            for batch in batches
            if batch.state.batch_state is BatchState.COMPLETED
            for child in batch.state.children
            if child.state.done
        }
        return all(child.task_id in settled for child in self.request.plan.enrollable)

    def _start(self, existing: str | None) -> StoredBatch:
        plan = self.request.plan
        if not plan.enrollable:
            raise UsageError(
                f"initiative {self.request.slug}: nothing is enrollable, no batch started"
            )
        if existing is not None and not self._may_reset(existing):
            self._recheck("the batch branch exists without a batch")
            raise UsageError(
                f"{batch_branch(self.request.slug)} exists and holds work that is not in "
                f"{self.request.base_ref} and belongs to no finished batch; merge or delete it, "
                "then start again"
            )
        now = self.ports.clock()
        state = BatchRunState(
            contract=STATE_CONTRACT,
            batch_id=self.request.new_batch_id,
            initiative_slug=self.request.slug,
            carrier=plan.carrier,
            plan_digest=plan.plan_digest,
            base_ref=self.request.base_ref,
            base_head=self.request.base_head,
            branch=batch_branch(self.request.slug),
            authorized_by=self.request.authorized_by,
            confirmation_time=now,
            budget=StateBudget(
                max_children=plan.budget.max_children, qa_failure_limit=plan.budget.qa_failure_limit
            ),
            max_parallel=plan.max_parallel,
            batch_state=BatchState.RUNNING,
            children=_pending_children(plan),
            commits=[],
            adopted_heads=[],
            created_at=now,
            updated_at=now,
        )
        report = build_report(state, decide(state, [c.task_id for c in state.children]), now)
        # The branch is created (or reset from a finished batch) in the same CAS as the state.
        branch_move = RefUpdate(self.branch_ref, self.request.base_head, existing)
        self.ports.log(f"starting batch {state.batch_id} at {self.request.base_head[:12]}")
        return self.store.write(None, state, report, self.results.stored(), [branch_move])

    def _may_reset(self, head: str) -> bool:
        """A new batch may move an existing batch branch back to the base only when nothing on
        it would be lost: it belongs to a finished batch and the base already contains it."""
        for batch in self.store.batches_of(self.request.slug):
            recorded = [
                *batch.state.commits,
                *(a.to for a in batch.state.adopted_heads),
                batch.state.base_head,
            ]
            if head in recorded and batch.state.batch_state.is_terminal:
                return self.repo.is_ancestor(head, self.request.base_head)
        return False

    # -- step 2 and 3: lineage and crash-orphaned integrations --------------------------------
    def _lineage(self, state: BatchRunState, head: str | None) -> tuple[BatchRunState, str | None]:
        expected = self._expected_head(state)
        if head is None:
            return state, f"{LINEAGE_BROKEN}: {state.branch} was deleted (expected {expected})"
        if head == expected:
            return state, None
        if not self.repo.is_ancestor(expected, head):
            return state, (
                f"{LINEAGE_BROKEN}: {state.branch} moved to {head}, which does not contain "
                f"the recorded head {expected}"
            )
        state = self._adopt_orphans(state, expected, head)
        if self._expected_head(state) != head:
            self.ports.log(f"adopting {head[:12]} pushed on top of {state.branch}")
            state = t.adopt_head(state, self._expected_head(state), head)
        return state, None

    def _expected_head(self, state: BatchRunState) -> str:
        """The newest recorded head: base, the last integration or the last adoption."""
        marks = [state.base_head, *state.commits[-1:], *(a.to for a in state.adopted_heads[-1:])]
        newest = marks[0]
        for mark in marks[1:]:
            if mark != newest and self.repo.is_ancestor(newest, mark):
                newest = mark
        return newest

    def _adopt_orphans(self, state: BatchRunState, expected: str, head: str) -> BatchRunState:
        for child in state.children:
            if not child.state.in_flight or child.lane is None or child.lane.lane_commit is None:
                continue
            found = find_orphaned_integration(
                self.repo,
                task_id=child.task_id,
                batch_id=state.batch_id,
                start=expected,
                end=head,
                lane_base=child.lane.base_head,
                lane_commit=child.lane.lane_commit,
            )
            if found is not None:
                self.ports.log(
                    f"recording {child.task_id}, integrated as {found[:12]} before a crash"
                )
                state = t.integrated(state, child.task_id, found)
        return state

    # -- step 4: lane outcomes ----------------------------------------------------------------
    def _observe_lanes(self, state: BatchRunState) -> BatchRunState:
        waiting = [
            c for c in state.children if c.state in (ChildState.LANE_ADMITTED, ChildState.SETTLED)
        ]
        if not waiting:
            return state
        refs = self.ports.refs.read(lane_outcome_ref(state.batch_id, c.task_id) for c in waiting)
        for child in waiting:
            commit = refs[lane_outcome_ref(state.batch_id, child.task_id)]
            outcome = read_outcome(self.repo, commit) if commit else None
            if outcome is not None and outcome.attempt == child.attempts:
                state = self._take_outcome(state, child, outcome)
                continue
            assert child.lane is not None
            match self.ports.probe.status(child.lane.runner):
                case RunnerStatus.FINISHED:
                    self.ports.log(
                        f"lane {child.task_id} ended without an outcome; admitting it again"
                    )
                    state = t.lane_lost(
                        state, child.task_id, "the lane's runner ended without an outcome"
                    )
                case RunnerStatus.ORPHANED:
                    state = t.lane_orphaned(state, child.task_id)
                case RunnerStatus.RUNNING:
                    pass
        return state

    def _take_outcome(
        self, state: BatchRunState, child: BatchChild, outcome: LaneOutcome
    ) -> BatchRunState:
        assert child.lane is not None
        lane_commit, qa_failures = outcome.lane_commit, outcome.qa_failures
        if outcome.state != "settled" or lane_commit is None:
            reason = outcome.reason or "the lane needs a person"
            return t.park(state, child.task_id, reason, qa_failures, outcome.failures)
        parents = self.repo.commit(lane_commit).parents if self.repo.resolve(lane_commit) else ()
        if parents != (child.lane.base_head,):
            why = (
                f"{LINEAGE_BROKEN}: lane commit {lane_commit} has parents "
                f"{', '.join(parents) or 'none'}, expected only the lane base "
                f"{child.lane.base_head}"
            )
            return t.park(state, child.task_id, why, qa_failures)
        return t.lane_committed(state, child.task_id, lane_commit, qa_failures)

    # -- step 5: integration ------------------------------------------------------------------
    def _integrate(
        self, stored: StoredBatch, state: BatchRunState, head: str
    ) -> tuple[StoredBatch, BatchRunState, str]:
        while True:
            ready = [c for c in state.children if c.state is ChildState.LANE_COMMITTED]
            if not ready:
                return stored, state, head
            stored, state, head, progressed = self._integrate_round(stored, state, head, ready)
            if not progressed:
                return stored, state, head

    def _integrate_round(
        self, stored: StoredBatch, state: BatchRunState, head: str, ready: list[BatchChild]
    ) -> tuple[StoredBatch, BatchRunState, str, bool]:
        """Build candidates for every ready lane speculatively, each on the one before; verify
        them in parallel; land them in plan order up to the first failure."""
        chain = self._speculative_chain(state, head, ready)
        jobs = [TreeJob(entry.candidate.tree, entry.checks) for entry in chain if entry.candidate]
        verified = iter(self.ports.verifier(self.results).verify_many(jobs))
        progressed = False
        for entry in chain:
            if entry.refusal is not None:
                state = t.park(state, entry.task_id, str(entry.refusal))
                stored = self._persist(stored, state, self._verdict(state))
                progressed = True
                continue
            assert entry.candidate is not None
            results = next(verified)
            if entry.candidate.head != head:
                break  # built on a candidate that did not land: rebuild next round
            failed = [r.check_id for r in results if not r.passed]
            if failed:
                candidate = entry.candidate.commit
                why = f"{CHECK_FAILED}: {', '.join(failed)} failed on candidate {candidate}"
                failures = check_failures(entry.checks, results)
                state = t.park(state, entry.task_id, why, failures=failures)
                stored = self._persist(stored, state, self._verdict(state))
                return stored, state, head, True
            state = t.integrated(state, entry.task_id, entry.candidate.commit)
            move = RefUpdate(self.branch_ref, entry.candidate.commit, head)
            stored = self._persist(stored, state, self._verdict(state), [move])
            self.ports.log(f"integrated {entry.task_id} as {entry.candidate.commit[:12]}")
            self.integrated.append(entry.task_id)
            head = entry.candidate.commit
            progressed = True
        return stored, state, head, progressed

    def _speculative_chain(
        self, state: BatchRunState, head: str, ready: list[BatchChild]
    ) -> list[_ChainEntry]:
        task_of_commit = {c.commit: c.task_id for c in state.children if c.commit}
        chain: list[_ChainEntry] = []
        tip = head
        for child in ready:
            assert child.lane is not None
            assert child.lane.lane_commit is not None
            try:
                candidate = build_candidate(
                    self.repo, tip, child.lane.base_head, child.lane.lane_commit
                )
                checks = candidate_checks(
                    self.repo,
                    candidate=candidate.commit,
                    task_id=child.task_id,
                    lane_base=child.lane.base_head,
                    head=tip,
                    task_of_commit=task_of_commit,
                )
            except IntegrationRefused as refusal:
                chain.append(_ChainEntry(child.task_id, None, (), refusal))
                continue
            chain.append(_ChainEntry(child.task_id, candidate, checks, None))
            task_of_commit[candidate.commit] = child.task_id
            tip = candidate.commit
        return chain

    # -- step 6 and 7: admission and the verdict --------------------------------------------------
    def _verdict(self, state: BatchRunState) -> Verdict:
        return decide(state, self._startable(state))

    def _startable(self, state: BatchRunState) -> list[str]:
        if state.batch_state.is_terminal:
            return []
        view = [
            CandidateChild(
                task_id=c.task_id,
                blocked_by=tuple(c.blocked_by),
                scope_hint=self.request.scopes.get(c.task_id, ()),
                pending=c.state is ChildState.PENDING,
                in_flight=c.state.in_flight,
                done=c.state.done,
            )
            for c in state.children
        ]
        limits = AdmissionLimits(
            max_parallel=state.max_parallel,
            admissions_left=state.budget.max_children - t.admissions_used(state),
            barrier_globs=self.request.barrier_globs,
        )
        return startable(view, limits)

    def _admit(self, state: BatchRunState, head: str) -> tuple[BatchRunState, list[str]]:
        chosen = self._startable(state)
        runner_for = self.request.runner_for
        if runner_for is None:
            raise UsageError("admission needs a lane runner")
        for task_id in chosen:
            state = t.admit(
                state,
                task_id,
                head,
                lane_branch(state.initiative_slug, task_id),
                runner_for(task_id),
            )
        return state, chosen

    # -- persistence ----------------------------------------------------------------------------
    def _persist(
        self,
        stored: StoredBatch,
        state: BatchRunState,
        verdict: Verdict,
        also: list[RefUpdate] | None = None,
    ) -> StoredBatch:
        now = self.ports.clock()
        final = state.model_copy(update={"batch_state": verdict.batch_state})
        report = build_report(final, verdict, now)
        if not also and _same(stored, final, report, self.results):
            return stored  # an idle pass writes nothing
        final = final.model_copy(update={"updated_at": now})
        report = build_report(final, verdict, now)
        return self.store.write(stored, final, report, self.results.stored(), also or [])


@dataclass(frozen=True)
class _ChainEntry:
    task_id: str
    candidate: Candidate | None
    checks: tuple[Check, ...]
    refusal: IntegrationRefused | None


def _same(
    stored: StoredBatch, state: BatchRunState, report: BatchRunReport, results: ResultCache
) -> bool:
    if stored.report is None:
        return False
    fresh_state = state.model_copy(update={"updated_at": stored.state.updated_at})
    fresh_report = report.model_copy(update={"created_at": stored.report.created_at})
    return (
        fresh_state == stored.state
        and fresh_report == stored.report
        and results.stored() == stored.cache
    )


def _pending_children(plan: BatchPlan) -> list[BatchChild]:
    """The batch's children: the enrollable tasks in plan order. Settled dependencies are
    done already, so `blocked_by` keeps only the enrollable ones."""
    enrollable = {child.task_id for child in plan.enrollable}
    return [
        BatchChild(
            task_id=child.task_id,
            slice_id=child.slice_id,
            blocked_by=[need for need in child.blocked_by if need in enrollable],
            state=ChildState.PENDING,
            reason=None,
            commit=None,
            lane=None,
            qa_failures=0,
            attempts=0,
        )
        for child in plan.children
        if child.task_id in enrollable
    ]
