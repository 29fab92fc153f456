"""The decisions of a reconcile pass, as tables over states and facts — no git repository.

Every reason code of SPEC §5.2/§5.4 has a row here; the facts are what observing would have
found (refs, outcomes, runner reports, candidate builds and check results)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from imm_action.git.candidate import (
    Candidate,
    ChangeNotCarried,
    LaneBaseNotInHead,
    LaneParentsWrong,
    MergeBaseForeign,
    MergeConflicts,
)
from imm_action.integrate import reasons
from imm_action.integrate import transitions as t
from imm_action.integrate.decide import (
    RECHECKS_BEFORE_BELIEVING,
    BatchDecision,
    Refuse,
    Reread,
    Start,
    StartRules,
    decide_batch,
    decide_start,
)
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFound,
    ChecksMissing,
    CommitFact,
    HeadFacts,
    LaneFacts,
    PassFacts,
    StartFacts,
)
from imm_action.integrate.landing import Land, Park, decide_landings
from imm_action.integrate.verdict import build_report, plan_changed_verdict, verdict
from imm_action.lanes.runners import (
    FinishedWithoutOutcome,
    JobFound,
    Orphaned,
    Running,
)
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import OUTCOME_CONTRACT, CheckResult, LaneOutcome
from imm_action.model.state import (
    STATE_CONTRACT,
    BatchChild,
    BatchRunState,
    BatchState,
    ChildState,
    GithubRunner,
    LocalRunner,
    StateBudget,
)
from imm_action.plan import lane_change
from imm_action.plan.lane_change import ChangedEntry, NamedPath
from imm_action.verify.checks import Check
from tests.conftest import descriptor

NOW = "2026-12-02T10:00:00.000Z"
DIGEST = "sha256:" + "0" * 64
BATCH = "batch-x-1"
JOB_URL = "https://github.example/acme/widgets/actions/runs/7/job/70"


def oid(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


BASE = oid("base")
LANE_A = oid("lane", "a")
HEAD = oid("head")


def batch(*children: BatchChild, commits: tuple[str, ...] = ()) -> BatchRunState:
    return BatchRunState(
        contract=STATE_CONTRACT,
        batch_id=BATCH,
        initiative_slug="x",
        carrier={"kind": "local", "path": "docs/initiatives/x.md"},  # type: ignore[arg-type]
        plan_digest=DIGEST,
        base_ref="main",
        base_head=BASE,
        branch="imm/x",
        authorized_by="local:test",
        confirmation_time=NOW,
        budget=StateBudget(max_children=len(children), qa_failure_limit=2),
        max_parallel=2,
        batch_state=BatchState.RUNNING,
        children=list(children),
        commits=list(commits),
        adopted_heads=[],
        created_at=NOW,
        updated_at=NOW,
    )


def pending(task: str, blocked_by: tuple[str, ...] = (), attempts: int = 0) -> BatchChild:
    return BatchChild(
        task_id=task,
        slice_id=f"s-{task}",
        blocked_by=list(blocked_by),
        state=ChildState.PENDING,
        reason=None,
        commit=None,
        lane=None,
        qa_failures=0,
        attempts=attempts,
    )


def admitted(task: str, *, attempts: int = 0, on_github: bool = False) -> BatchRunState:
    """A batch of `task` (admitted on BASE) and `dependent` (pending, blocked by it)."""
    state = batch(pending(task, attempts=attempts), pending("dependent", (task,)))
    runner = (
        GithubRunner(run_id=7, run_attempt=1, job=task)
        if on_github
        else LocalRunner(path="lane.log", pid=None)
    )
    return t.admit(state, task, BASE, f"imm-lane/x/{task}", runner)


def outcome(
    task: str,
    *,
    attempt: int = 0,
    commit: str | None = LANE_A,
    state: str = "settled",
    reason: str | None = None,
) -> LaneOutcome:
    return LaneOutcome(
        contract=OUTCOME_CONTRACT,
        batch_id=BATCH,
        task_id=task,
        attempt=attempt,
        state=state,
        reason=reason,
        qa_failures=1,
        findings=[],
        lane_commit=commit,  # type: ignore[arg-type]
    )


def calm_head() -> HeadFacts:
    return HeadFacts(head=BASE, recorded=BASE, contains_recorded=True)


def lanes_pass(state: BatchRunState, facts: LaneFacts, reads: int = 0) -> BatchDecision:
    decided = decide_batch(state, DIGEST, PassFacts(calm_head(), {"a": facts}, reads))
    assert isinstance(decided, BatchDecision)
    return decided


def child(state: BatchRunState, task: str = "a") -> BatchChild:
    return t.child_of(state, task)


# -- §5.2: every reason code a pass writes, one row each ----------
@dataclass(frozen=True)
class Row:
    decide: Callable[[], BatchRunState]
    task: str
    reason_starts: str
    reason_has: tuple[str, ...] = ()


def _plan_changed() -> BatchRunState:
    decided = decide_batch(admitted("a"), "sha256:" + "1" * 64, PassFacts(calm_head()))
    assert isinstance(decided, BatchDecision)
    assert decided.plan_changed
    assert decided.state.batch_state is BatchState.NEEDS_HUMAN
    # the batch, not a child, carries the reason: the verdict says it
    reason = plan_changed_verdict(decided.state).reason
    return decided.state.model_copy(
        update={
            "children": [c.model_copy(update={"reason": reason}) for c in decided.state.children]
        }
    )


def _branch_deleted() -> BatchRunState:
    facts = PassFacts(HeadFacts(head=None, recorded=BASE, contains_recorded=False), reads=3)
    decided = decide_batch(admitted("a"), DIGEST, facts)
    assert isinstance(decided, BatchDecision)
    assert decided.state.batch_state is BatchState.FAILED
    return decided.state


def _branch_rewritten() -> BatchRunState:
    facts = PassFacts(HeadFacts(head=HEAD, recorded=BASE, contains_recorded=False), reads=3)
    decided = decide_batch(admitted("a"), DIGEST, facts)
    assert isinstance(decided, BatchDecision)
    return decided.state


def _lane_commit_off_base() -> BatchRunState:
    facts = LaneFacts(outcome("a"), (oid("elsewhere"),), Running())
    return lanes_pass(admitted("a"), facts).state


def _outcome_and_branch_disagree() -> BatchRunState:
    facts = LaneFacts(outcome("a"), (BASE,), Running(), branch_head=oid("elsewhere"))
    return lanes_pass(admitted("a"), facts).state


def _lost_three_times() -> BatchRunState:
    state = admitted("a", attempts=2, on_github=True)
    facts = LaneFacts(None, None, FinishedWithoutOutcome("timed_out", JOB_URL))
    return lanes_pass(state, facts).state


def _landing(
    build: object,
    checks: object = None,
    results: tuple[CheckResult, ...] = (),
    change: tuple[ChangedEntry, ...] = (),
    scope: tuple[str, ...] = ("a.txt",),
) -> BatchRunState:
    state = admitted("a")
    state = t.lane_committed(state, "a", LANE_A, 0)
    entry = CandidateFacts(
        "a", BASE, LANE_A, HEAD, build, checks, results,  # type: ignore[arg-type]
        change=change, scope=scope, plan_paths=PLAN_PATHS, check_files=CHECK_FILES,
    )  # fmt: skip
    decided = decide_landings(HEAD, [entry])
    for step in decided.steps:
        if isinstance(step, Park):
            state = t.park(state, step.task_id, step.reason)
    return state


CANDIDATE = Candidate(oid("candidate"), oid("tree"), HEAD, BASE, LANE_A)
PLAN_PATHS = frozenset(
    {"docs/plans/a.intent.json", "docs/plans/b.intent.json", "docs/initiatives/x.md",
     ".github/imm.yml"}
)  # fmt: skip


CHECK_FILES = {
    "scripts/check_c.sh": NamedPath(frozenset({"c"}), frozenset({"c"})),
    "scripts/check_a.sh": NamedPath(frozenset({"a"}), frozenset({"a"})),
}


def _checks() -> ChecksFound:
    return ChecksFound((Check("a:ok", parse_descriptor(descriptor(["-c", "pass"]))),))


def _failed(check_id: str) -> CheckResult:
    return CheckResult(
        check_id=check_id,
        passed=False,
        exit_code=1,
        duration_ms=3,
        timed_out=False,
        output_limited=False,
        changed_outside=[],
        output_tail="no",
        error=None,
    )


ROWS = {
    "plan digest changed": Row(_plan_changed, "a", reasons.PLAN_CHANGED),
    "branch deleted": Row(_branch_deleted, "a", reasons.LINEAGE_BROKEN, ("was deleted",)),
    "lane commit not on its base": Row(
        _lane_commit_off_base, "a", reasons.LINEAGE_BROKEN, ("expected only the lane base",)
    ),
    "lane lost a third time": Row(
        _lost_three_times, "a", reasons.LANE_LOST, ("timed_out", JOB_URL, "3 lost attempts")
    ),
    "lane commit with two parents": Row(
        lambda: _landing(LaneParentsWrong((BASE, HEAD))),
        "a",
        reasons.LINEAGE_BROKEN,
        ("2 parents, expected exactly one",),
    ),
    "lane commit on another parent": Row(
        lambda: _landing(LaneParentsWrong((HEAD,))),
        "a",
        reasons.LINEAGE_BROKEN,
        ("does not descend from lane base",),
    ),
    "lane base not in the head": Row(
        lambda: _landing(LaneBaseNotInHead()),
        "a",
        reasons.LINEAGE_BROKEN,
        ("is not an ancestor of batch head",),
    ),
    "foreign merge base": Row(
        lambda: _landing(MergeBaseForeign((oid("x"),))),
        "a",
        reasons.LINEAGE_BROKEN,
        ("not the lane base",),
    ),
    "textual conflict": Row(
        lambda: _landing(MergeConflicts(("shared.txt", "z.txt"))),
        "a",
        reasons.CONFLICT,
        ("in: shared.txt, z.txt",),
    ),
    "change not carried": Row(
        lambda: _landing(ChangeNotCarried(oid("c"))),
        "a",
        reasons.CONFLICT,
        ("does not carry exactly the change",),
    ),
    "check failed on candidate": Row(
        lambda: _landing(CANDIDATE, _checks(), (_failed("a:ok"),)),
        "a",
        reasons.CHECK_FAILED,
        (f"a:ok failed on candidate {CANDIDATE.commit}",),
    ),
    "no descriptor on candidate": Row(
        lambda: _landing(CANDIDATE, ChecksMissing(None, "none")),
        "a",
        reasons.CHECK_FAILED,
        ("no descriptor to rerun",),
    ),
    "intent absent from candidate": Row(
        lambda: _landing(CANDIDATE, ChecksMissing("a", "absent")),
        "a",
        reasons.CHECK_FAILED,
        ("intent of a is absent from candidate",),
    ),
    "intent unreadable in candidate": Row(
        lambda: _landing(CANDIDATE, ChecksMissing("a", "unreadable", "bad json")),
        "a",
        reasons.CHECK_FAILED,
        ("intent of a is unreadable", "bad json"),
    ),
    "cancelled by a person": Row(lambda: t.cancel(admitted("a")), "a", reasons.CANCELLED),
    "outcome and lane branch disagree": Row(
        _outcome_and_branch_disagree, "a", reasons.OUTCOME_MISMATCH, (oid("elsewhere"),)
    ),
    "a sibling's intent, inside a docs/** scope": Row(
        lambda: _landing(
            CANDIDATE,
            _checks(),
            scope=("docs/**",),
            change=(ChangedEntry("docs/plans/b.intent.json", "100644"),),
        ),
        "a",
        lane_change.TOUCHES_PLAN,
        ("docs/plans/b.intent.json",),
    ),
    "the config, inside a .github/** scope": Row(
        lambda: _landing(
            CANDIDATE,
            _checks(),
            scope=(".github/**",),
            change=(ChangedEntry(".github/imm.yml", "000000"),),
        ),
        "a",
        lane_change.TOUCHES_PLAN,
        (".github/imm.yml",),
    ),
    "a script a sibling's check runs, inside a scripts/** scope": Row(
        lambda: _landing(
            CANDIDATE,
            _checks(),
            scope=("scripts/**",),
            change=(
                ChangedEntry("scripts/check_a.sh", "100755"),
                ChangedEntry("scripts/check_c.sh", "100755"),
            ),
        ),
        "a",
        lane_change.TOUCHES_CHECK,
        ("scripts/check_c.sh (c)",),
    ),
    "a path outside the scope": Row(
        lambda: _landing(CANDIDATE, _checks(), change=(ChangedEntry("EVIL.txt", "100644"),)),
        "a",
        lane_change.OUTSIDE_SCOPE,
        ("EVIL.txt",),
    ),
    "a path under .git": Row(
        lambda: _landing(CANDIDATE, _checks(), change=(ChangedEntry("a.txt/.git/x", "100644"),)),
        "a",
        lane_change.GIT_PATH,
        ("a.txt/.git/x",),
    ),
    "a gitlink": Row(
        lambda: _landing(CANDIDATE, _checks(), change=(ChangedEntry("a.txt", "160000"),)),
        "a",
        lane_change.GITLINK,
        ("a.txt",),
    ),
    "a symlink out of the repository": Row(
        lambda: _landing(
            CANDIDATE, _checks(), change=(ChangedEntry("a.txt", "120000", "/etc/passwd"),)
        ),
        "a",
        lane_change.SYMLINK_OUT,
        ("a.txt",),
    ),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_reason_code_is_decided_from_facts_alone(name: str) -> None:
    row = ROWS[name]
    parked = child(row.decide(), row.task)
    assert parked.reason is not None
    assert parked.reason.startswith(row.reason_starts)
    for part in row.reason_has:
        assert part in parked.reason


def test_a_lane_may_change_the_script_its_own_check_runs() -> None:
    state = _landing(
        CANDIDATE, _checks(), scope=("scripts/**",),
        change=(ChangedEntry("scripts/check_a.sh", "100755"),),
    )  # fmt: skip
    assert child(state, "a").state is not ChildState.NEEDS_HUMAN


def test_the_table_covers_every_reason_code() -> None:
    covered = {row.reason_starts for row in ROWS.values()}
    assert covered == set(reasons.ALL_CODES)


def test_a_parked_child_skips_its_pending_dependents() -> None:
    state = _landing(MergeConflicts(("shared.txt",)))
    assert child(state, "dependent").state is ChildState.SKIPPED_BLOCKED
    assert child(state, "dependent").reason == "dependency a parked"


# -- lineage: believed only after reading again ----------
def test_a_broken_lineage_is_read_again_before_it_is_believed() -> None:
    facts = PassFacts(HeadFacts(head=None, recorded=BASE, contains_recorded=False), reads=0)
    assert isinstance(decide_batch(admitted("a"), DIGEST, facts), Reread)


def test_a_terminal_batch_stays_as_it_is() -> None:
    cancelled = t.cancel(admitted("a"))
    decided = decide_batch(cancelled, "sha256:" + "1" * 64, PassFacts(calm_head()))
    assert isinstance(decided, BatchDecision)
    assert decided.settled
    assert decided.state == cancelled


# -- adoption (SPEC §5.2 steps 2 and 3; issue 21 #2) ----------
def _committed_a() -> BatchRunState:
    return t.lane_committed(admitted("a"), "a", LANE_A, 0)


def _waiting() -> BatchRunState:
    """A batch with no lane in flight: a, parked; b, pending behind it."""
    return t.park(admitted("a"), "a", "parked by the test")


def _commit(name: str, subject: str, trailer: bool, committer: str = "") -> CommitFact:
    message = f"{subject}\n\nImmune-Brain-Batch: {BATCH}\n" if trailer else f"{subject}\n"
    return CommitFact(oid(name), subject, message, (BASE,), committer)


def _decided(state: BatchRunState, *commits: CommitFact) -> BatchRunState | str:
    head = HeadFacts(commits[-1].oid, BASE, True, commits)
    decided = decide_batch(state, DIGEST, PassFacts(head, reads=RECHECKS_BEFORE_BELIEVING))
    assert isinstance(decided, BatchDecision)
    return decided.state


def test_a_rewritten_branch_is_quarantined_and_the_batch_goes_on() -> None:
    """Issue 42 #4: it failed the batch, costing every lane in flight."""
    state = _branch_rewritten()
    assert state.batch_state is BatchState.RUNNING
    assert child(state, "a").state is ChildState.LANE_ADMITTED
    [kept] = state.quarantined
    assert (kept.foreign, kept.restored) == (HEAD, BASE)
    assert kept.reason.startswith(reasons.LINEAGE_BROKEN)
    assert "does not contain the recorded head" in kept.reason


def test_a_move_while_a_lane_runs_is_never_adopted_and_is_quarantined_naming_it() -> None:
    pushed = _commit("person", "fix a typo", False, "Alice Maintainer <alice@example.com>")
    state = _decided(_committed_a(), pushed)
    assert isinstance(state, BatchRunState)
    assert state.batch_state is BatchState.RUNNING
    assert state.adopted_heads == []
    [kept] = state.quarantined
    assert kept.reason.startswith(reasons.LINEAGE_BROKEN)
    assert f"first commit {pushed.oid}" in kept.reason
    assert "while lanes of the batch were running (a)" in kept.reason
    told = build_report(state, verdict(state, []), NOW)
    assert told.quarantined[0].startswith(f"quarantined: {pushed.oid} (pushed onto imm/")


def test_an_unrecorded_integration_while_its_lane_runs_is_never_recorded() -> None:
    """What a crash of imm can no longer leave (the branch and the state move in one
    transaction), a sibling's executor can forge: it is kept aside, never recorded."""
    forged = _commit("orphan", "imm(a): Do a", True)
    state = _decided(_committed_a(), forged)
    assert isinstance(state, BatchRunState)
    assert state.commits == []
    assert [kept.foreign for kept in state.quarantined] == [forged.oid]


def test_a_commit_pushed_by_a_person_while_no_lane_runs_is_adopted_unverified() -> None:
    pushed = _commit("person", "fix a typo", False, "Ann <ann@example.com>")
    state = _decided(_waiting(), pushed)
    assert isinstance(state, BatchRunState)
    assert [(a.from_, a.to) for a in state.adopted_heads] == [(BASE, pushed.oid)]
    told = build_report(state, verdict(state, []), NOW)
    assert told.adopted == [f"adopted: {pushed.oid} (pushed outside imm, unverified)"]
    assert "Ann" not in told.model_dump_json()


def test_a_commit_with_the_trailer_is_never_adopted_even_when_no_lane_runs() -> None:
    forged = _commit("forged", "imm(a): Do a", True)
    state = _decided(_waiting(), forged)
    assert isinstance(state, BatchRunState)
    assert state.adopted_heads == []
    assert f"lane-made commit {forged.oid} is never adopted" in state.quarantined[0].reason


# -- lanes (SPEC §5.2 step 4) ----------
def test_a_settled_outcome_of_this_attempt_moves_the_child_to_lane_committed() -> None:
    state = lanes_pass(admitted("a"), LaneFacts(outcome("a"), (BASE,), Running())).state
    assert child(state).state is ChildState.LANE_COMMITTED
    assert child(state).qa_failures == 1


def test_an_outcome_of_an_earlier_attempt_is_not_taken() -> None:
    state = admitted("a", attempts=1)
    after = lanes_pass(state, LaneFacts(outcome("a", attempt=0), (BASE,), Running())).state
    assert child(after).state is ChildState.LANE_ADMITTED


def test_a_lane_that_needs_a_person_parks_with_its_own_reason() -> None:
    facts = LaneFacts(
        outcome("a", commit=None, state="needs_human", reason="lane_empty: x"), None, Running()
    )
    assert child(lanes_pass(admitted("a"), facts).state).reason == "lane_empty: x"


@pytest.mark.parametrize("conclusion", ["failure", "timed_out", "skipped"])
def test_a_lane_lost_before_its_third_attempt_goes_back_to_pending(conclusion: str) -> None:
    facts = LaneFacts(None, None, FinishedWithoutOutcome(conclusion, JOB_URL))
    lost = child(lanes_pass(admitted("a", attempts=1, on_github=True), facts).state)
    assert (lost.state, lost.attempts, lost.lane) == (ChildState.PENDING, 2, None)


def test_a_lane_whose_job_was_cancelled_goes_back_to_pending_uncounted_and_stops_the_batch() -> (
    None
):
    facts = LaneFacts(None, None, FinishedWithoutOutcome("cancelled", JOB_URL))
    state = lanes_pass(admitted("a", attempts=1, on_github=True), facts).state
    again = child(state)
    assert (again.state, again.attempts, again.lane) == (ChildState.PENDING, 1, None)
    assert state.stop_reason is not None
    assert state.stop_reason.startswith(f"{reasons.RUN_CANCELLED}: workflow run ")
    assert verdict(state, ["a"]).batch_state is BatchState.CANCELLED


def test_an_orphaned_lane_goes_back_to_pending_without_counting_an_attempt() -> None:
    again = child(lanes_pass(admitted("a"), LaneFacts(None, None, Orphaned())).state)
    assert (again.state, again.attempts) == (ChildState.PENDING, 0)


def test_a_running_lane_waits_and_its_job_is_recorded_when_found() -> None:
    job = JobFound(70, "lane (a)", JOB_URL)
    state = lanes_pass(admitted("a", on_github=True), LaneFacts(None, None, Running(job))).state
    lane = child(state).lane
    assert lane is not None
    assert child(state).state is ChildState.LANE_ADMITTED
    assert isinstance(lane.runner, GithubRunner)
    assert (lane.runner.job_id, lane.runner.job, lane.runner.job_url) == (70, "lane (a)", JOB_URL)


# -- landing a verified stack (SPEC §5.4) ----------
SECOND = Candidate(oid("c2"), oid("t2"), CANDIDATE.commit, BASE, oid("lane", "b"))


def _passed(check_id: str) -> CheckResult:
    return _failed(check_id).model_copy(update={"passed": True, "exit_code": 0})


def _stack_entry(
    task_id: str,
    build: Candidate,
    results: tuple[CheckResult, ...] = (),
    judged_on: str | None = None,
    **more: object,
) -> CandidateFacts:
    checks = ChecksFound((Check(f"{task_id}:ok", parse_descriptor(descriptor(["-c", "ok"]))),))
    return CandidateFacts(
        task_id, BASE, build.lane_commit, build.head, build, checks, results,
        judged_on=judged_on, **more,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_stack_whose_top_passed_lands_every_lane_at_its_own_candidate() -> None:
    first = _stack_entry("a", CANDIDATE, (_passed("a:ok"),), SECOND.tree)
    second = _stack_entry("b", SECOND, (_passed("b:ok"),), SECOND.tree)
    decided = decide_landings(HEAD, [first, second])
    assert decided.steps == (
        Land("a", CANDIDATE.commit, HEAD),
        Land("b", SECOND.commit, CANDIDATE.commit),
    )
    assert decided.again


def test_nothing_of_a_stack_lands_while_its_top_is_not_judged() -> None:
    first = _stack_entry("a", CANDIDATE, (_passed("a:ok"),), SECOND.tree)
    second = _stack_entry("b", SECOND)
    assert decide_landings(HEAD, [first, second]).steps == ()


def test_lanes_judged_on_different_trees_never_land_together() -> None:
    first = _stack_entry("a", CANDIDATE, (_passed("a:ok"),), CANDIDATE.tree)
    second = _stack_entry("b", SECOND, (_passed("b:ok"),), SECOND.tree)
    assert decide_landings(HEAD, [first, second]).steps == ()


def test_a_lane_lands_only_with_a_result_for_every_check_it_is_judged_by() -> None:
    first = _stack_entry("a", CANDIDATE, (), CANDIDATE.tree)
    assert decide_landings(HEAD, [first]).steps == ()


def test_a_stale_candidate_waits_for_the_next_round() -> None:
    first = _stack_entry("a", CANDIDATE, (_passed("a:ok"),), CANDIDATE.tree)
    stale_candidate = Candidate(oid("c3"), oid("t3"), oid("elsewhere"), BASE, oid("lane", "c"))
    stale = _stack_entry("c", stale_candidate, (_passed("c:ok"),), CANDIDATE.tree)
    decided = decide_landings(HEAD, [first, stale])
    assert decided.steps == (Land("a", CANDIDATE.commit, HEAD),)


def test_culprits_are_parked_and_nothing_else_of_their_stack_lands() -> None:
    first = _stack_entry("a", CANDIDATE)
    culprit = _stack_entry("b", SECOND, (_failed("b:ok"),), SECOND.tree)
    decided = decide_landings(HEAD, [first, culprit])
    assert [(type(step), step.task_id) for step in decided.steps] == [(Park, "b")]
    assert decided.again


def test_a_culprit_is_parked_naming_its_own_candidate_and_the_check_it_broke() -> None:
    broken = Check("z:suite", parse_descriptor(descriptor(["-c", "suite"])))
    culprit = _stack_entry("b", SECOND, (_failed("z:suite"),), SECOND.tree, also_checks=(broken,))
    (step,) = decide_landings(HEAD, [culprit]).steps
    assert isinstance(step, Park)
    assert step.reason == f"{reasons.CHECK_FAILED}: z:suite failed on candidate {SECOND.commit}"
    assert [failure.step for failure in step.failures] == ["z:suite"]


def test_a_lane_refused_above_the_first_culprit_waits_for_the_rebuilt_stack() -> None:
    culprit = _stack_entry("a", CANDIDATE, (_failed("a:ok"),), CANDIDATE.tree)
    conflicting = _stack_entry("b", SECOND)
    conflicting = replace(conflicting, build=MergeConflicts(("a.txt",)))
    decided = decide_landings(HEAD, [culprit, conflicting])
    assert [step.task_id for step in decided.steps] == ["a"]


# -- starting (SPEC §5.2 step 1) ----------
RULES = StartRules(slug="x", base_ref="main", batch_branch="imm/x", may_start=True, enrollable=2)


def test_a_new_batch_resets_a_branch_its_base_already_contains() -> None:
    facts = StartFacts(branch_head=BASE, base_contains_branch=True, all_settled=False)
    assert decide_start(RULES, facts) == Start(reset_from=BASE)


def test_a_branch_holding_work_outside_the_base_is_refused_once_read_again() -> None:
    seen = StartFacts(branch_head=HEAD, base_contains_branch=False, all_settled=False, reads=0)
    believed = StartFacts(branch_head=HEAD, base_contains_branch=False, all_settled=False, reads=3)
    assert isinstance(decide_start(RULES, seen), Reread)
    refused = decide_start(RULES, believed)
    assert isinstance(refused, Refuse)
    assert "holds work that is not in main" in refused.message


def test_nothing_enrollable_starts_nothing() -> None:
    rules = StartRules(
        slug="x", base_ref="main", batch_branch="imm/x", may_start=True, enrollable=0
    )
    facts = StartFacts(branch_head=None, base_contains_branch=False, all_settled=False)
    assert isinstance(decide_start(rules, facts), Refuse)


def test_the_verdict_of_a_batch_with_a_parked_child_names_it() -> None:
    state = _landing(MergeConflicts(("shared.txt",)))
    decided = verdict(state, [])
    assert decided.batch_state is BatchState.NEEDS_HUMAN
    assert decided.reason.startswith("task a needs a person: batch_integration_conflict")


# -- a lineage failure (reference `failLineage`) ----------
def _fail_lineage(state: BatchRunState) -> BatchRunState:
    facts = PassFacts(HeadFacts(head=None, recorded=BASE, contains_recorded=False), reads=3)
    decided = decide_batch(state, DIGEST, facts)
    assert isinstance(decided, BatchDecision)
    assert decided.state.batch_state is BatchState.FAILED
    return decided.state


def test_a_lineage_failure_with_no_lane_in_flight_keeps_its_reason() -> None:
    failed = _fail_lineage(batch(pending("a"), pending("b", ("a",))))
    told = verdict(failed, [])
    assert told.reason.startswith(f"{reasons.LINEAGE_BROKEN}: imm/x was deleted")
    assert failed.stop_reason == told.reason


def test_a_lineage_failure_skips_the_dependents_of_the_lanes_it_parks() -> None:
    failed = _fail_lineage(admitted("a"))
    assert child(failed, "a").state is ChildState.NEEDS_HUMAN
    assert (child(failed, "a").reason or "").startswith(reasons.LINEAGE_BROKEN)
    assert child(failed, "dependent").state is ChildState.SKIPPED_BLOCKED
    assert child(failed, "dependent").reason == "dependency a parked"
