"""The reconcile pass driver (SPEC §5.2): observe → decide → apply, again on fresh refs when
another writer was first. It holds no rule and no reason code: the facts come from
`passes.observe`, every decision from `integrate.decide`, every write goes through
`passes.apply`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from imm_action.errors import UsageError
from imm_action.git.errors import GitConflict
from imm_action.git.repo import RefUpdate
from imm_action.integrate import transitions as t
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.decide import (
    AdmissionRules,
    BatchDecision,
    Refuse,
    ReportAgain,
    Reread,
    Resume,
    Start,
    StartRules,
    all_settled,
    decide_admissions,
    decide_batch,
    decide_start,
    parallel_mismatch,
    startable_children,
)
from imm_action.integrate.facts import StartFacts
from imm_action.integrate.landing import (
    Land,
    apply_landing,
    decide_landings,
    head_failure_reason,
    landing_moves,
    ready_to_integrate,
    verified_on_top,
)
from imm_action.integrate.reasons import BASE_CHECK_FAILED
from imm_action.integrate.stack_record import StackRecord
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.integrate.verdict import Verdict, plan_changed_verdict, verdict
from imm_action.model.refs import batch_branch, heads
from imm_action.model.state import BatchChild, BatchRunState
from imm_action.passes.apply import Applier
from imm_action.passes.continuing import (
    Continuing,
    FreshStart,
    StartPlan,
    new_batch_state,
    pending_children,
)
from imm_action.passes.gate import NO_GATE, gate_at, green_base
from imm_action.passes.observe import (
    ObservedStack,
    lane_code_notes,
    observe_candidates,
    observe_pass,
    recorded_head,
    stack_record,
)
from imm_action.passes.pass_refs import current_lane_refs, stale_lane_refs, verify_ref_update
from imm_action.passes.request import (
    MAX_LOST_RACES,
    GaveUpError,
    PassPorts,
    PassRequest,
    PassResult,
)
from imm_action.passes.speculative import admit_lanes
from imm_action.passes.verify_round import fanned_out, own_lanes, take_verdicts, with_rounds
from imm_action.verify.result_cache import ResultCache


def reconcile(
    request: PassRequest, ports: PassPorts, results: ResultCache | None = None
) -> PassResult:
    """One pass, run again from scratch whenever another writer moved a ref first (a lost
    CAS) or the refs looked half-moved (a decision to read them again). `results`: check
    results known already (`imm run` keeps them between passes)."""
    # survives lost races: a check already run is not run again
    results = ResultCache() if results is None else results
    last = "a ref moved"
    for lost in range(MAX_LOST_RACES):
        ports.refs.refresh()
        try:
            done = _Pass(request, ports, results, lost).run()
        except GitConflict as race:
            lines = race.stderr.strip().splitlines()
            detail = lines[-1] if lines else "a ref moved"
            # git's own words when a lock is in the way (a file, and how to clear it)
            last = next((line for line in lines if "Unable to create" in line), detail)
            ports.debug(f"lost a race ({detail}); re-running the pass on fresh refs ({lost + 1})")
            ports.pause(lost)
            continue
        if isinstance(done, Reread):
            last = done.why
            ports.debug(
                f"lost a race ({done.why}; reading the refs again); re-running the pass on "
                f"fresh refs ({lost + 1})"
            )
            ports.pause(lost)
            continue
        return PassResult(
            done.stored, done.admitted, done.integrated, lost, done.head, done.unverified,
            tuple(done.stacks), done.base_check_runs, done.startable,
        )  # fmt: skip
    raise GaveUpError(
        f"gave up after {MAX_LOST_RACES} lost races on the refs of {request.slug}; the last: {last}"
    )


@dataclass
class _Done:
    stored: StoredBatch
    admitted: tuple[str, ...] = ()
    integrated: tuple[str, ...] = ()
    head: str | None = None
    unverified: tuple[str, ...] = ()
    stacks: Sequence[StackRecord] = ()
    base_check_runs: int = 0
    startable: tuple[str, ...] = ()


class _Pass:
    def __init__(
        self, request: PassRequest, ports: PassPorts, results: ResultCache, reads: int
    ) -> None:
        self.request = request
        self.ports = ports
        self.reads = reads
        self.repo = ports.refs.repo
        self.store = StateStore(ports.refs)
        self.results = results
        self.apply = Applier(self.store, results, ports.clock)
        self.branch_ref = heads(batch_branch(request.slug))
        self.rules = AdmissionRules(request.scopes, request.barrier_globs,
                                    request.in_flight_usd, request.speculative_lanes)  # fmt: skip
        self.stacks: list[StackRecord] = []  # what each round of integration verified
        self.base_check_runs = 0  # the branch checks run on the base (the green-base check)
        self.keep: list[str] = []  # speculative lanes' bases, kept by the state commit
        self.left: set[str] = set()  # lanes left to the later run that admitted them
        self.continued = False  # this pass started a continuation: the request's decision is in it
        self.verify = request.verify and request.fan_out is None  # may this pass run checks?
        self.observed: ObservedStack | None = None  # the last stack the pass observed
        self.from_verdicts = 0  # results taken from verify jobs' verdicts
        self.reported: dict[str, int] = {}  # check id -> ms, as lanes said their checks took
        self.unconfined: list[str] = []  # why lane code ran unconfined, as this pass saw
        self.gate = NO_GATE  # the branch checks and `held_checks`, read with the state

    def run(self) -> _Done | Reread:
        loaded = self._load_or_start()
        if isinstance(loaded, Reread):
            return loaded
        stored = loaded
        self.results.seed(stored.cache)
        state = stored.state if self.continued else self._mutated(stored.state)
        # the repository's own checks, from the config the batch was planned with (issue 44)
        self.gate = gate_at(self.repo.path, state.judged_at, self.request.config_file)
        head = self.ports.refs.read([self.branch_ref])[self.branch_ref]
        facts = observe_pass(self.ports.refs, state, head, self.ports.lanes, self.reads)
        # how long the lanes' checks took, as they say: what checks never run here will take
        self.reported = {
            check_id: duration
            for lane in facts.lanes.values()
            if lane.outcome is not None
            for check_id, duration in lane.outcome.durations_ms.items()
        }
        # why lane code ran unconfined (or what its network refused), as this pass and the
        # lanes it observes say
        self.unconfined = lane_code_notes(self.ports.unconfined, facts.lanes.values())
        decision = decide_batch(state, self.request.plan.plan_digest, facts)
        if isinstance(decision, Reread):
            return decision
        if self.request.stopped is Stopped.CONTINUE and t.run_cancelled(decision.state):
            # a person asked the batch to go on (`/imm run`, a dispatch) in the very pass that
            # first saw its run cancelled: the cancelled lanes are pending again, no stop
            decision = replace(decision, state=t.resume_after_cancel(decision.state))
        for note in decision.notes:
            self.ports.log(note)
        kept = decision.quarantine
        if kept is not None:
            # the branch people merge holds only verified work: the foreign head goes aside
            # and the branch back to the last verified head, with the state, in one write;
            # then the pass goes on from there (issue 42 #4)
            also = [
                RefUpdate(self.branch_ref, kept.restored, kept.foreign),
                RefUpdate(kept.ref, kept.foreign, None),
            ]
            stored = self.apply.persist(stored, decision.state, self._settled(decision), also)
            head = kept.restored
        if decision.settled or head is None:
            settled = self.apply.persist(stored, decision.state, self._settled(decision))
            return _Done(settled, head=head)
        return self._go_on(stored, decision.state, head)

    def _mutated(self, state: BatchRunState) -> BatchRunState:
        if self.request.mutate is None:
            return state
        if state.batch_state.is_terminal:
            raise UsageError(f"batch {state.batch_id} is {state.batch_state}; nothing to change")
        return self.request.mutate(state)

    def _settled(self, decision: BatchDecision) -> Verdict:
        if decision.plan_changed:
            return plan_changed_verdict(decision.state)
        return verdict(decision.state, [])

    def _go_on(self, stored: StoredBatch, state: BatchRunState, head: str) -> _Done:
        loaded = state
        taken = take_verdicts(state, self.request, self.results, self.ports.log)
        state, self.verify = taken.state, self.verify and taken.verify
        self.from_verdicts = self.from_verdicts if taken.taken is None else taken.taken
        stored, state, head, integrated, unverified = self._integrate(stored, state, head)
        state, set_back = t.set_back_speculative(state)
        for task in set_back:  # a dependency of its speculative base will not land as it was
            self.ports.log(f"{task}: set back, to start again once its dependencies land")
        admitted: tuple[str, ...] = ()
        # a cancelled workflow run stops the batch: nothing more is admitted in this pass
        if self.request.admit and not t.run_cancelled(state):
            state = self._green_base(state, head)
            if not (state.stop_reason or "").startswith(BASE_CHECK_FAILED):
                state, admitted = self._admit(state, head)
        stale = stale_lane_refs(self.ports.refs, state, admitted)
        if self.request.fan_out is not None:
            state = fanned_out(
                state, self.request.fan_out, self.observed, unverified, self.ports.log,
                round_alive=self.request.round_alive,
            )  # fmt: skip
        startable = tuple(startable_children(state, self.rules))
        if verdict(state, startable).batch_state.is_terminal:
            state = with_rounds(state, [])  # no verify job's verdict can matter any more
        stale += verify_ref_update(self.ports.refs, loaded, state)
        # an earlier run's verify jobs fetch its round's top by id: the ref follows the newest
        self.keep += [earlier.top for earlier in state.verifying_earlier]
        state = t.note_unconfined(state, self.unconfined)
        if self.gate.checks or self.gate.held != "all":  # say what gated its moves
            state = t.note_held_checks(state, self.gate.held)
        tree = self.repo.commit(head).tree
        self.results.hold(tree)  # the head's runs stay: candidates are judged by its tests
        state = self._branch_verdicts(state, head, tree)
        stored = self.apply.persist(stored, state, verdict(state, startable), stale, self.keep)
        return _Done(
            stored, admitted, integrated, head, unverified, self.stacks, self.base_check_runs,
            startable,
        )  # fmt: skip

    # -- step 1: load or start ------------------------------------------------------------------
    def _load_or_start(self) -> StoredBatch | Reread:
        wanted = self.request.batch_id
        if wanted is not None:
            found = self.store.load(wanted)
            if found is None:
                raise UsageError(f"no batch {wanted}")
            if found.state.initiative_slug != self.request.slug:
                raise UsageError(f"batch {wanted} belongs to {found.state.initiative_slug}")
            return self._resumed(found)
        # Read the branch before the batches: a batch is created with its branch in one CAS, so
        # a branch seen here means its batch is seen below (or the start loses the CAS).
        existing = self.ports.refs.read([self.branch_ref])[self.branch_ref]
        stopped = self._stopped(existing)
        if stopped is not None:
            return stopped
        active = self.store.active(self.request.slug)
        earlier = self.store.batches_of(self.request.slug)
        plan = self.request.plan
        rules = StartRules(
            slug=self.request.slug,
            base_ref=self.request.base_ref,
            batch_branch=batch_branch(self.request.slug),
            may_start=self.request.start,
            enrollable=len(plan.enrollable),
            active=active.state.batch_id if active else None,
            latest=earlier[-1].state.batch_id if earlier else None,
        )
        facts = StartFacts(
            branch_head=existing,
            base_contains_branch=existing is not None
            and self.repo.is_ancestor(existing, self.request.base_head),
            all_settled=all_settled(
                [b.state for b in earlier], [c.task_id for c in plan.enrollable]
            ),
            reads=self.reads,
            finished_on_branch=self._finished_on(existing, earlier[-1] if earlier else None),
        )
        match decide_start(rules, facts):
            case Resume():
                if active is None:
                    raise UsageError(f"initiative {self.request.slug} has no active batch")
                return self._resumed(active)
            case ReportAgain():
                return earlier[-1]
            case Refuse(message=message):
                raise UsageError(message)
            case Reread() as again:
                return again
            case Start(reset_from=reset_from):
                return self._start(reset_from)

    def _finished_on(
        self, branch: str | None, latest: StoredBatch | None
    ) -> tuple[str, str] | None:
        """The latest batch, when it is finished and the branch is where it left it."""
        if branch is None or latest is None or not latest.state.batch_state.is_terminal:
            return None
        if recorded_head(self.repo, latest.state) != branch:
            return None
        return latest.state.batch_id, str(latest.state.batch_state)

    def _resumed(self, stored: StoredBatch) -> StoredBatch:
        refused = parallel_mismatch(stored.state, self.request.parallel_asked)
        if refused is not None:
            raise UsageError(refused)
        return stored

    def _start_plan(self) -> StartPlan:
        request = self.request
        return StartPlan(
            slug=request.slug, plan=request.plan, base_ref=request.base_ref,
            base_head=request.base_head, authorized_by=request.authorized_by,
            new_batch_id=request.new_batch_id, stopped=request.stopped, retry=request.retry,
            committer=request.committer, settled=request.settled,
            parallel_asked=request.parallel_asked, max_cost_usd=request.max_cost_usd,
        )  # fmt: skip

    def _stopped(self, existing: str | None) -> StoredBatch | None:
        """A continuation of the latest batch, or a fresh start, when the request asks for
        one and the latest batch stopped (SPEC §5.7); None goes the usual way."""
        start = self._start_plan()
        ports = self.ports
        decided = Continuing(ports.refs, self.results, ports.clock, ports.log).decide(
            start, existing
        )
        if isinstance(decided, FreshStart):
            return self._start(decided.reset_from, decided.also)
        self.continued = decided is not None
        return decided

    def _start(self, existing: str | None, also: Sequence[RefUpdate] = ()) -> StoredBatch:
        plan = self.request.plan
        state = new_batch_state(
            self._start_plan(),
            self.ports.clock(),
            pending_children(plan),
            self.request.base_head,
            [],
            flaky_before=self.store.flaky_in_repository(),
        )
        self.ports.log(f"starting batch {state.batch_id} at {self.request.base_head[:12]}")
        # The branch is created (or reset from a finished batch) in the same CAS as the state.
        branch = RefUpdate(self.branch_ref, self.request.base_head, existing)
        first = verdict(state, [c.task_id for c in state.children])
        return self.apply.start(state, first, branch, also)

    # -- step 5: integration ---------------------------------------------------------------------
    def _integrate(
        self, stored: StoredBatch, state: BatchRunState, head: str
    ) -> tuple[StoredBatch, BatchRunState, str, tuple[str, ...], tuple[str, ...]]:
        integrated: list[str] = []
        unverified: tuple[str, ...] = ()
        # the bisect and integrate jobs judge their own run's stack (ADR 0075)
        given = self.request.verdicts
        run_id = given.run_id if given is not None else None
        while ready := self._own_lanes(state, run_id):
            state = t.judge_head_again(state)
            verifier = self.ports.verifier(self.results)
            observed = observe_candidates(
                self.repo, verifier, state, head, ready, scopes=self.request.scopes,
                verify=self.verify, memo=self.ports.candidates,
                config_file=self.request.config_file, reported=self.reported,
                owe=self.request.fan_out is not None, gate=self.gate,
            )  # fmt: skip
            self.observed = observed
            state = t.note_flaky(state, observed.flaky)
            chain = observed.chain
            built = {entry.task_id for entry in chain}
            unverified = tuple(c.task_id for c in ready if c.task_id not in built)
            record = stack_record(observed, verifier, self.verify, self.from_verdicts)
            if record is not None:
                self.stacks.append(record)
                self.ports.log(record.line())
            if observed.on_head:
                reason = head_failure_reason(state.branch, head, observed.on_head)
                state = t.head_check_failed(state, reason)
                break
            landing = decide_landings(head, chain)
            if not landing.steps:
                break
            lane_refs = current_lane_refs(self.ports.refs, state, ready)
            # One CAS for the whole round: the branch moves from the head to the last landed
            # candidate, with the state recording every step. A writer killed while git commits
            # the transaction leaves at most the branch ahead of the state, and the next pass
            # adopts those integrations (SPEC §5.2 step 3), however many.
            also: list[RefUpdate] = []
            keep: list[str] = []
            landed: list[Land] = []
            if landing_moves(landing):
                state = t.record_head_checks(state, *verified_on_top(chain, landing))
            for step in landing.steps:
                state = apply_landing(state, step)
                if isinstance(step, Land):
                    # The lane's branch and outcome ref go in the same CAS (their ids stay in
                    # the state; a finished batch leaves its branch and its state ref, not 2N
                    # refs); the state commit keeps the outcome as a further parent, so the
                    # audit chain still reaches it and the lane commit.
                    branch, outcome = lane_refs[step.task_id]
                    also += [RefUpdate(ref, None, old) for ref, old in (branch, outcome) if old]
                    keep += [outcome[1]] if outcome[1] else []
                    landed.append(step)
            if landed:
                also.insert(0, RefUpdate(self.branch_ref, landed[-1].commit, head))
                top = landed[-1].commit  # the head it moves to
                state = self._branch_verdicts(state, top, self.repo.commit(top).tree)
            stored = self.apply.persist(stored, state, self._verdict(state), also, keep)
            for step in landed:
                self.ports.log(f"integrated {step.task_id} as {step.commit[:12]}")
                integrated.append(step.task_id)
                head = step.commit
            if not landing.again:
                break
        return stored, state, head, tuple(integrated), unverified

    def _own_lanes(self, state: BatchRunState, run_id: int | None) -> list[BatchChild]:
        ready = ready_to_integrate(state)
        own = own_lanes(ready, run_id, self.request.round_alive)
        said = {c.task_id for c in own} | self.left  # stacked, or left and said so already
        left = [c.task_id for c in ready if c.task_id not in said]
        if left:
            self.left.update(left)
            self.ports.log(f"{', '.join(left)}: left to the later run that admitted them")
        return own

    # -- step 6 and 7: admission and the verdict ----------------------------------------------
    def _branch_verdicts(self, state: BatchRunState, head: str, tree: str) -> BatchRunState:
        """Each branch check's last verdict on `head`, for the reports — recorded with every
        move, so a run stopped between a move and its pass's end names the head it judged."""
        if not self.gate.checks:
            return state
        return t.note_branch_verdicts(state, self.gate.verdicts(self.results, tree, head))

    def _verdict(self, state: BatchRunState) -> Verdict:
        return verdict(state, startable_children(state, self.rules))

    def _green_base(self, state: BatchRunState, head: str) -> BatchRunState:
        """Before the batch's first lane starts, its base must pass the branch checks (issue
        44): on a red base every lane would be blamed, or the head check fail "on the head
        itself". Reused from the cache while the base and the checks are unchanged."""
        if not self.gate.checks or t.admissions_used(state):
            return state
        verifier = self.ports.verifier(self.results)
        base = (head, self.repo.commit(head).tree)
        state = green_base(verifier, self.gate, state, base, self.ports.log)
        self.base_check_runs += verifier.runs
        return state

    def _admit(self, state: BatchRunState, head: str) -> tuple[BatchRunState, tuple[str, ...]]:
        admits = decide_admissions(state, head, self.rules)
        state, started, keep = admit_lanes(self.repo, state, admits, self.ports.lanes.runner_for)
        self.keep += keep
        return state, started
