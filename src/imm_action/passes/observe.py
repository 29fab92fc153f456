"""Observe: what the world looks like to a pass — refs, lane outcomes, runner reports, and the
candidates built and verified on the batch head. Nothing here decides; it only gathers facts
for `imm_action.integrate.decide`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from imm_action.git.candidate import BuildResult, Candidate, build_candidate
from imm_action.git.refs import RefStore
from imm_action.git.repo import GitRepo
from imm_action.integrate.decide import waiting_lanes
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFact,
    ChecksFound,
    CommitFact,
    HeadFacts,
    LaneFacts,
    PassFacts,
)
from imm_action.integrate.flakes import FlakeRules
from imm_action.integrate.judgement import held_tasks, verifiable, with_judgement
from imm_action.integrate.landing import refusal_of
from imm_action.integrate.stack import (
    StackFailed,
    StackLevel,
    StackPassed,
    Suspected,
    judge_stack,
    united_checks,
)
from imm_action.integrate.stack_record import Culprit, StackRecord
from imm_action.lanes.change import changed_entries, tree_links
from imm_action.lanes.outcome import read_outcome
from imm_action.lanes.runners import (
    FinishedWithOutcome,
    FinishedWithoutOutcome,
    JobFound,
    LaneAtWork,
    LaneRunners,
    RunnerReport,
)
from imm_action.model.config import CONFIG_PATH
from imm_action.model.ledger import TestLedger
from imm_action.model.network import refused_address_line
from imm_action.model.outcome import CheckResult, LaneOutcome
from imm_action.model.refs import QUARANTINE, heads, lane_branch, lane_outcome_ref
from imm_action.model.shard import OwedCheck
from imm_action.model.state import BatchChild, BatchRunState, known_flaky
from imm_action.passes.gate import NO_GATE, BranchGate
from imm_action.passes.intent_checks import (
    IntentMemo,
    candidate_checks,
    check_files,
    held_checks,
    plan_paths,
    retired_tests,
)
from imm_action.passes.speculative import waits_for_its_base
from imm_action.passes.stack_answers import counted, judged_prefix, owed_checks, running
from imm_action.plan.lane_change import ChangedEntry
from imm_action.verify.checks import Check, TreeJob, Verifier


def recorded_head(repo: GitRepo, state: BatchRunState) -> str:
    """The newest head the state recorded: base, the last integration or the last adoption."""
    marks = [state.base_head, *state.commits[-1:], *(a.to for a in state.adopted_heads[-1:])]
    newest = marks[0]
    for mark in marks[1:]:
        if mark != newest and repo.is_ancestor(newest, mark):
            newest = mark
    return newest


def observe_head(
    repo: GitRepo, state: BatchRunState, head: str | None, refs: RefStore | None = None
) -> HeadFacts:
    recorded = recorded_head(repo, state)
    if head is None or head == recorded:
        return HeadFacts(head, recorded, contains_recorded=head is not None)
    kept = len(refs.list(f"{QUARANTINE}{state.batch_id}/")) if refs is not None else 0
    if not repo.is_ancestor(recorded, head):
        return HeadFacts(head, recorded, contains_recorded=False, quarantined=kept)
    since = repo.commits_between(recorded, head)
    infos = [repo.commit(oid) for oid in since]
    commits = tuple(
        CommitFact(
            info.oid,
            info.subject,
            info.message,
            info.parents,
            f"{info.committer.name} <{info.committer.email}>",
        )
        for info in infos
    )
    return HeadFacts(head, recorded, True, commits, kept)


def observe_lanes(
    refs: RefStore, state: BatchRunState, runners: LaneRunners
) -> dict[str, LaneFacts]:
    """Each waiting lane's outcome and what its runner says. A runner that reports a lane
    finished without an outcome is believed only after the outcome refs were read afresh: the
    lane may have published just before it ended, after this pass first read the refs."""
    waiting = waiting_lanes(state)
    if not waiting:
        return {}
    names = {c.task_id: heads(lane_branch(state.initiative_slug, c.task_id)) for c in waiting}
    outcomes, branches = _outcomes(refs, state.batch_id, waiting, also=names.values())
    reports = runners.reports(_at_work(waiting, outcomes))
    ended = [c for c in waiting if _ended_without(reports.get(c.task_id))]
    if ended:
        refs.refresh()
        outcomes.update(_outcomes(refs, state.batch_id, ended)[0])
        reports = {**reports, **{
            c.task_id: FinishedWithOutcome(_job_of(reports.get(c.task_id)))
            for c in ended
            if _current(outcomes[c.task_id], c)
        }}  # fmt: skip
    facts: dict[str, LaneFacts] = {}
    for child in waiting:
        outcome = outcomes[child.task_id]
        commit = outcome.lane_commit if outcome else None
        found = refs.repo.commit_if_present(commit) if commit else None
        parents = found.parents if found else None
        report = reports.get(child.task_id)
        if report is not None:
            facts[child.task_id] = LaneFacts(
                outcome, parents, report, branches[names[child.task_id]]
            )
    return facts


def lane_code_notes(pass_note: str | None, lanes: Iterable[LaneFacts]) -> list[str]:
    """What a batch's report says of where its lane code ran: why this pass (its checks) or a
    lane ran unconfined, or that executors reach any host; and each host `lane_network`
    refused a lane's executor, with the line that allows it (issue 60)."""
    notes = [pass_note] if pass_note else []
    for lane in lanes:
        outcome = lane.outcome
        if outcome is None:
            continue
        if outcome.unconfined:
            notes.append(outcome.unconfined)
        notes += [f"refused: {refused_address_line('lane_network', address)}"
                  for address in outcome.blocked_hosts]  # fmt: skip
    return notes


def _ended_without(report: RunnerReport | None) -> bool:
    return isinstance(report, FinishedWithoutOutcome)


def _job_of(report: RunnerReport | None) -> JobFound | None:
    return report.job if isinstance(report, FinishedWithoutOutcome) else None


def _outcomes(
    refs: RefStore, batch_id: str, children: Sequence[BatchChild], also: Iterable[str] = ()
) -> tuple[dict[str, LaneOutcome | None], dict[str, str | None]]:
    """Each child's outcome of the lane, and where the refs `also` point (in the same read)."""
    names = {c.task_id: lane_outcome_ref(batch_id, c.task_id) for c in children}
    commits = refs.read([*names.values(), *also])
    found: dict[str, LaneOutcome | None] = {}
    for task_id, name in names.items():
        commit = commits[name]
        found[task_id] = read_outcome(refs.repo, commit) if commit else None
    return found, commits


def _current(outcome: LaneOutcome | None, child: BatchChild) -> bool:
    return outcome is not None and outcome.attempt == child.attempts


def _at_work(
    children: Sequence[BatchChild], outcomes: Mapping[str, LaneOutcome | None]
) -> list[LaneAtWork]:
    return [
        LaneAtWork(c.task_id, c.lane.runner, _current(outcomes[c.task_id], c))
        for c in children
        if c.lane is not None
    ]


def observe_pass(
    refs: RefStore, state: BatchRunState, head: str | None, runners: LaneRunners, reads: int
) -> PassFacts:
    head_facts = observe_head(refs.repo, state, head, refs)
    # a head that does not hold the recorded one is kept aside and the batch goes on from the
    # recorded one (issue 42 #4): its lanes are observed all the same
    lanes = observe_lanes(refs, state, runners) if head_facts.head is not None else {}
    return PassFacts(head_facts, lanes, reads)


# -- candidates ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuiltCandidate:
    """What building one candidate found, before any check ran."""

    build: BuildResult
    checks: ChecksFact | None
    change: tuple[ChangedEntry, ...]
    links: Mapping[str, str] | None = None  # the candidate tree's links, when they matter
    retired: tuple[str, ...] = ()  # the tests its task's intent retires (issue 58)


CandidateKey = tuple[str, str, str, str]  # task, lane base, lane commit, the head it is built on


class CandidateMemo:
    """Candidates built earlier in this run, by their inputs — commit ids, so an entry is
    never stale: a pass that finds the same lane on the same head does not build it again
    (`imm run` passes often, and its background checks build the chain before the pass)."""

    LIMIT = 4096

    def __init__(self) -> None:
        self.built: dict[CandidateKey, BuiltCandidate] = {}
        self.intents: IntentMemo = {}

    def get(self, key: CandidateKey) -> BuiltCandidate | None:
        return self.built.get(key)

    def put(self, key: CandidateKey, value: BuiltCandidate) -> None:
        if len(self.built) >= self.LIMIT:  # the oldest half goes: heads move on
            for old in list(self.built)[: self.LIMIT // 2]:
                del self.built[old]
        self.built[key] = value


@dataclass(frozen=True)
class ObservedStack:
    """The chain of candidates with what judging their stack found, and the checks of tasks
    already on the branch that failed on every run on the batch head itself, or on a
    candidate and its parent alike (nobody's lane's)."""

    chain: list[CandidateFacts]
    on_head: tuple[tuple[Check, CheckResult], ...] = ()
    head_checks: int = 0  # distinct checks every level is judged by: those the branch holds
    probes: int = 0  # (tree, check) results the judgement used
    carried: int = 0  # of those, passes carried over (nothing the check reads changed)
    # the others, as (tree, digest, attempt on the head): a stack judged from the cache may
    # reuse what an earlier stack's judgement ran (a probe of bisection that is now the top)
    ran: frozenset[tuple[str, str, int]] = frozenset()
    # (`verify` False) what judging the whole stack needs next that the cache does not know,
    # and the stack's top candidate commit: what verify jobs on other runners may run
    owed: tuple[OwedCheck, ...] = ()
    top: str | None = None
    flaky: tuple[str, ...] = ()  # a test's id (or a check's) per tree it flipped on
    shared: int = 0  # verdicts another check's run gave (the same command on the same tree)


def observe_candidates(
    repo: GitRepo,
    verifier: Verifier,
    state: BatchRunState,
    head: str,
    ready: Sequence[BatchChild],
    *,
    scopes: Mapping[str, tuple[str, ...]],
    verify: bool = True,
    memo: CandidateMemo | None = None,
    config_file: str = CONFIG_PATH,
    reported: Mapping[str, int] | None = None,
    owe: bool = False,
    gate: BranchGate = NO_GATE,
) -> ObservedStack:
    """Build a candidate for every ready lane, each on the one before (unless it must not
    land), and judge the stack they make (SPEC §5.4, `integrate.stack`) on the batch head:
    the united checks — every lane's own and every integrated task's — once on the top,
    bisection of what fails there. `verify` False runs no check (and, with a `memo`, builds
    nothing): the stack is judged from the verifier's cache alone, as far as the background
    checks verified it; lanes above that are left out of the chain, as if their lanes had not
    ended yet."""
    intents: IntentMemo = memo.intents if memo is not None else {}
    held = gate.head_checks(held_checks(repo, state, intents))
    chain = _built_chain(
        repo, state, head, ready, scopes=scopes, verify=verify, memo=memo,
        config_file=config_file, intents=intents, gate=gate,
    )  # fmt: skip
    stacked = [index for index, entry in enumerate(chain) if verifiable(entry)]
    head_tree = repo.commit(head).tree
    levels = [StackLevel(head_tree, held, head_ledgers(verifier, head_tree, held))]
    for index in stacked:
        levels.append(_level(chain[index], levels[-1].retired))
    held_count = len({check.digest for check in held})
    flakes = FlakeRules(known_flaky(state), gate.flaky)
    used: dict[tuple[int, str, int], CheckResult] = {}
    owed: tuple[OwedCheck, ...] = ()
    top_commit = None
    if owe and not verify and stacked:  # the stack job's: what verify jobs may run
        owed = tuple(owed_checks(levels, verifier.cache, reported, flakes))
        last = chain[stacked[-1]].build
        top_commit = last.commit if isinstance(last, Candidate) else None
    if verify:
        top = len(levels) - 1
        build = partial(_built_chain, repo, state, head, scopes=scopes, verify=True, memo=memo,
                        config_file=config_file, intents=intents, gate=gate)  # fmt: skip
        ahead = _verify_without(verifier, ready, [chain[i] for i in stacked], levels[0], build)
        try:
            judged = judge_stack(
                levels, counted(running(verifier, levels), used), verifier.workers.floor,
                flakes, suspected=ahead,
            )  # fmt: skip
        finally:  # its runs are this judgement's, counted with the stack's; none outlives it
            verifier.wait_ahead()
    else:
        top, judged = judged_prefix(levels, verifier.cache, verifier.workers.floor, used, flakes)
    if judged is None or top < 1:
        # nothing judged: the lanes refused below the stack are all that can be decided
        return ObservedStack(
            chain[: stacked[0]] if stacked else chain,
            head_checks=held_count, owed=owed, top=top_commit,
        )  # fmt: skip
    chain = chain[: stacked[top - 1] + 1]
    if isinstance(judged, StackPassed):  # a rerun that passed is the top's verdict (issue 61)
        for digest, result in judged.results.items():
            if result.flaky_tests and result.passed:
                verifier.cache.put(levels[top].tree, digest, result)
    judged_chain = with_judgement(chain, stacked[:top], levels[: top + 1], judged)
    on_head = judged.on_head if isinstance(judged, StackFailed) else ()
    carried = sum(1 for result in used.values() if result.carried_over)
    ran = frozenset(
        (levels[level].tree, digest, again)
        for (level, digest, again), result in used.items()
        if not result.carried_over and result.ran_as is None
    )
    shared = sum(1 for result in used.values() if result.ran_as is not None)
    return ObservedStack(
        judged_chain, on_head, held_count, len(used), carried, ran, owed=owed, top=top_commit,
        flaky=judged.flaky, shared=shared,
    )  # fmt: skip


def _built_chain(
    repo: GitRepo,
    state: BatchRunState,
    head: str,
    ready: Sequence[BatchChild],
    *,
    scopes: Mapping[str, tuple[str, ...]],
    verify: bool,
    memo: CandidateMemo | None,
    config_file: str,
    intents: IntentMemo,
    gate: BranchGate = NO_GATE,
) -> list[CandidateFacts]:
    """The candidates of the ready lanes, each built on the last that may land, each judged
    by its own checks, every integrated task's and those of the lanes below it."""
    below = held_tasks(state)
    protected = plan_paths(state, config_file) | frozenset(gate.scripts)
    named = check_files(repo, state, intents)
    chain: list[CandidateFacts] = []
    tip = head
    for child in ready:
        lane = child.lane
        if lane is None or lane.lane_commit is None or waits_for_its_base(child, below):
            continue  # (a speculative lane lands only after its dependencies: issue 61)
        key = (child.task_id, lane.base_head, lane.lane_commit, tip)
        built = memo.get(key) if memo is not None else None
        if built is None and not verify and memo is not None:
            # Not built yet: it waits for the background checks, which build it, as if its
            # lane had not ended yet; the lanes after it are built without it, as the
            # background checks built them.
            continue
        if built is None:
            built = _build(repo, key, gate.below(below), intents, state.judged_at,
                           speculative=bool(lane.speculative_on))  # fmt: skip
            if memo is not None:
                memo.put(key, built)
        build = built.build
        entry = CandidateFacts(
            child.task_id, lane.base_head, lane.lane_commit, tip, build, gate.joined(built.checks),
            change=built.change, scope=tuple(scopes.get(child.task_id, ())),
            plan_paths=protected, tree_links=built.links, check_files=named,
            retired=built.retired,
        )  # fmt: skip
        chain.append(entry)
        if isinstance(build, Candidate) and refusal_of(entry) is None:
            below.append(child.task_id)
            tip = build.commit
    return chain


def _verify_without(
    verifier: Verifier,
    ready: Sequence[BatchChild],
    stacked: Sequence[CandidateFacts],
    head: StackLevel,
    build: Callable[[Sequence[BatchChild]], list[CandidateFacts]],
) -> Suspected:
    """What verifies, while bisection's suspects are tried, the stack the pass goes on with if
    they are parked (issue 61): every other ready lane, built as the pass will build them —
    those below the suspects on the head, those above on the last of them (the same
    candidates: the memo keeps them) — its top's united checks run in the background into the
    cache, so a culprit costs the lanes above it no second round."""

    def suspected(suspects: frozenset[int]) -> None:
        out = {stacked[level - 1].task_id for level in suspects}
        rebuilt = [entry for entry in build([c for c in ready if c.task_id not in out])
                   if verifiable(entry)]  # fmt: skip
        if rebuilt:
            levels = [head, *(_level(entry, frozenset()) for entry in rebuilt)]
            checks = tuple(united_checks(levels).values())
            verifier.verify_ahead([TreeJob(levels[-1].tree, checks)])

    return suspected


def _level(entry: CandidateFacts, retired_below: frozenset[str]) -> StackLevel:
    if not isinstance(entry.build, Candidate) or not isinstance(entry.checks, ChecksFound):
        raise TypeError(f"{entry.task_id} is not verifiable")
    return StackLevel(entry.build.tree, entry.checks.checks,
                      retired=retired_below | frozenset(entry.retired))  # fmt: skip


def head_ledgers(verifier: Verifier, tree: str, checks: Sequence[Check]) -> dict[str, TestLedger]:
    """The tests each check of the head's level reported where it passed on the head, by
    digest: what every candidate above it must pass again (issue 58). Only what is known —
    run there, or carried over — counts: a check never run on the head has nothing to lose."""
    found: dict[str, TestLedger] = {}
    for check in checks:
        result = verifier.known(tree, check)
        if result is not None and result.passed and result.tests is not None:
            found[check.digest] = result.tests
    return found


def stack_record(
    observed: ObservedStack, verifier: Verifier, ran_here: bool, on_runners: int = 0
) -> StackRecord | None:
    """What a judged chain says of its stack, for the log and the job summary; None when no
    lane of it was judged (nothing ran, nothing was found). `ran_here`: the pass ran the
    checks itself (the verifier counted them); else `imm run`'s background worker ran them,
    and every result the judgement used that was neither carried over nor counted by an
    earlier stack (the cache keeps what each stack counted) is one of its runs."""
    # of what the judgement used: verify jobs' verdicts (`on_runners`), passes carried over,
    # and the runs of this pass (`ran_here`) or of `imm run`'s background worker
    first_used = verifier.cache.first_counted(observed.ran)
    ahead = 0
    if ran_here:
        # results run ahead, while the lanes below were tried, were counted with their runs
        ahead = verifier.cache.run_ahead(observed.ran)
        given = verifier.runs - verifier.ahead_runs + observed.shared + ahead
        on_runners = min(on_runners, max(0, observed.probes - given))
        check_runs = verifier.runs
        carried = max(0, observed.probes - given - on_runners)
    else:
        carried = observed.carried
        on_runners = min(on_runners, first_used)
        check_runs = first_used - on_runners
    chain = observed.chain
    judged = [entry for entry in chain if entry.judged_on is not None]
    on_head = tuple(check.check_id for check, _ in observed.on_head)
    if not judged and not on_head:
        return None
    culprits = tuple(
        Culprit(
            entry.task_id,
            tuple(result.check_id for result in entry.results if not result.passed),
            entry.build.commit,
        )
        for entry in judged
        if isinstance(entry.build, Candidate) and any(not r.passed for r in entry.results)
    )
    lanes = tuple(entry.task_id for entry in chain if verifiable(entry))
    return StackRecord(
        lanes, check_runs, culprits, carried, on_head, on_runners, observed.shared, ahead
    )


def _build(
    repo: GitRepo,
    key: CandidateKey,
    below: Sequence[str],
    intents: IntentMemo,
    judged_at: str,
    *,
    speculative: bool = False,
) -> BuiltCandidate:
    task_id, lane_base, lane_commit, tip = key
    build = build_candidate(repo, tip, lane_base, lane_commit, speculative=speculative)
    checks: ChecksFact | None = None
    if isinstance(build, Candidate):
        checks = candidate_checks(repo, judged_at, task_id=task_id, below=below, intents=intents)
    change = tuple(changed_entries(repo, lane_base, lane_commit))
    links = tree_links(repo, build.commit, change) if isinstance(build, Candidate) else None
    return BuiltCandidate(build, checks, change, links, retired_tests(repo, judged_at, task_id))
