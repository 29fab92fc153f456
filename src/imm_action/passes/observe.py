"""Observe: what the world looks like to a pass — refs, lane outcomes, runner reports, and the
candidates built and verified on the batch head. Nothing here decides; it only gathers facts
for `imm_action.integrate.decide`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic import ValidationError

from imm_action.carriers.source import carrier_file
from imm_action.git.candidate import BuildResult, Candidate, build_candidate
from imm_action.git.refs import RefStore
from imm_action.git.repo import GitRepo
from imm_action.integrate.decide import refusal_of, waiting_lanes
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFact,
    ChecksFound,
    ChecksMissing,
    CommitFact,
    HeadFacts,
    LaneFacts,
    PassFacts,
)
from imm_action.integrate.shards import DEFAULT_CHECK_MS
from imm_action.integrate.stack import (
    Ask,
    Culprit,
    Probe,
    StackFailed,
    StackJudgement,
    StackLevel,
    StackPassed,
    StackRecord,
    judge_stack,
    united_checks,
)
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
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.intent import TaskIntent, intent_path
from imm_action.model.outcome import CheckResult, LaneOutcome
from imm_action.model.refs import QUARANTINE, heads, lane_branch, lane_outcome_ref
from imm_action.model.shard import OwedCheck
from imm_action.model.state import BatchChild, BatchRunState
from imm_action.passes.gate import NO_GATE, BranchGate
from imm_action.plan.check_paths import named_paths
from imm_action.plan.lane_change import ChangedEntry
from imm_action.verify.checks import Check, ResultCache, TreeJob, Verifier


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


CandidateKey = tuple[str, str, str, str]  # task, lane base, lane commit, the head it is built on
IntentChecks = tuple[Check, ...] | ChecksMissing
# (task, intent blob id) -> its acceptance checks, or why there are none: blobs never change
IntentMemo = dict[tuple[str, str], IntentChecks]


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
    already on the branch that failed twice on the batch head itself (nobody's lane's)."""

    chain: list[CandidateFacts]
    on_head: tuple[tuple[Check, CheckResult], ...] = ()
    head_checks: int = 0  # distinct checks every level is judged by: those the branch holds
    probes: int = 0  # (tree, check) results the judgement used
    carried: int = 0  # of those, passes carried over (nothing the check reads changed)
    # (`verify` False) what judging the whole stack needs next that the cache does not know,
    # and the stack's top candidate commit: what verify jobs on other runners may run
    owed: tuple[OwedCheck, ...] = ()
    top: str | None = None


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
    stacked = [index for index, entry in enumerate(chain) if _verifiable(entry)]
    head_level = StackLevel(repo.commit(head).tree, held)
    levels = [head_level, *(_level(chain[index]) for index in stacked)]
    held_count = len({check.digest for check in held})
    used: dict[tuple[int, str, int], CheckResult] = {}
    owed: tuple[OwedCheck, ...] = ()
    top_commit = None
    if owe and not verify and stacked:  # the stack job's: what verify jobs may run
        owed = tuple(owed_checks(levels, verifier.cache, reported))
        last = chain[stacked[-1]].build
        top_commit = last.commit if isinstance(last, Candidate) else None
    if verify:
        top = len(levels) - 1
        judged = judge_stack(
            levels, _counted(_running(verifier, levels), used), verifier.workers.floor
        )
    else:
        top, judged = _judged_prefix(levels, verifier.cache, verifier.workers.floor, used)
    if judged is None or top < 1:
        # nothing judged: the lanes refused below the stack are all that can be decided
        return ObservedStack(
            chain[: stacked[0]] if stacked else chain,
            head_checks=held_count, owed=owed, top=top_commit,
        )  # fmt: skip
    chain = chain[: stacked[top - 1] + 1]
    judged_chain = _with_judgement(chain, stacked[:top], levels[: top + 1], judged)
    on_head = judged.on_head if isinstance(judged, StackFailed) else ()
    carried = sum(1 for result in used.values() if result.carried_over)
    return ObservedStack(
        judged_chain, on_head, held_count, len(used), carried, owed=owed, top=top_commit
    )


def _counted(ask: Ask, used: dict[tuple[int, str, int], CheckResult]) -> Ask:
    """`ask`, keeping every answer it gave (what the judgement used, for the true counts)."""

    def counting(probes: Sequence[Probe]) -> Mapping[tuple[int, str], CheckResult] | None:
        answers = ask(probes)
        if answers is not None:
            used.update(((p.level, p.check.digest, p.again), answers[(p.level, p.check.digest)])
                        for p in probes)  # fmt: skip
        return answers

    return counting


def held_checks(repo: GitRepo, state: BatchRunState, intents: IntentMemo) -> tuple[Check, ...]:
    """The checks of every task whose change the batch branch holds (this batch's and, in a
    continuation, the earlier batches'), read from the plan's intents."""
    found = _owned_checks(repo, state.judged_at, held_tasks(state), intents)
    return found.checks if isinstance(found, ChecksFound) else ()


def checks_by_digest(
    repo: GitRepo, state: BatchRunState, more: Sequence[Check] = ()
) -> dict[str, Check]:
    """Every acceptance check of the batch's tasks, by descriptor digest, read from the plan's
    intents (a verify job's descriptors: never a candidate's tree), and `more` (the branch
    checks, read from the plan's config)."""
    intents: IntentMemo = {}
    found: dict[str, Check] = {check.digest: check for check in more}
    for child in state.children:
        checks = _owned_checks(repo, state.judged_at, [child.task_id], intents)
        if isinstance(checks, ChecksFound):
            found.update((check.digest, check) for check in checks.checks)
    return found


def held_tasks(state: BatchRunState) -> list[str]:
    """The integrated tasks, in the order they landed."""
    order = {commit: index for index, commit in enumerate(state.commits)}
    done = [child for child in state.children if child.state.done and child.commit]
    return [child.task_id for child in sorted(done, key=lambda c: order.get(c.commit or "", 0))]


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
    protected = plan_paths(state, config_file)
    named = check_files(repo, state, intents)
    chain: list[CandidateFacts] = []
    tip = head
    for child in ready:
        lane = child.lane
        if lane is None or lane.lane_commit is None:
            continue
        key = (child.task_id, lane.base_head, lane.lane_commit, tip)
        built = memo.get(key) if memo is not None else None
        if built is None and not verify and memo is not None:
            # Not built yet: it waits for the background checks, which build it, as if its
            # lane had not ended yet; the lanes after it are built without it, as the
            # background checks built them.
            continue
        if built is None:
            built = _build(repo, key, gate.below(below), intents, state.judged_at)
            if memo is not None:
                memo.put(key, built)
        build = built.build
        entry = CandidateFacts(
            child.task_id, lane.base_head, lane.lane_commit, tip, build, gate.joined(built.checks),
            change=built.change, scope=tuple(scopes.get(child.task_id, ())),
            plan_paths=protected, tree_links=built.links, check_files=named,
        )  # fmt: skip
        chain.append(entry)
        if isinstance(build, Candidate) and refusal_of(entry) is None:
            below.append(child.task_id)
            tip = build.commit
    return chain


def _level(entry: CandidateFacts) -> StackLevel:
    if not isinstance(entry.build, Candidate) or not isinstance(entry.checks, ChecksFound):
        raise TypeError(f"{entry.task_id} is not verifiable")
    return StackLevel(entry.build.tree, entry.checks.checks)


def _running(verifier: Verifier, levels: Sequence[StackLevel]) -> Ask:
    """Probes run by the verifier: every probe's check in one queue its workers pull from."""

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult]:
        again = [probe for probe in probes if probe.again]
        if again:
            tree, attempt = levels[0].tree, again[0].again
            results = verifier.verify_again(tree, [probe.check for probe in again], attempt)
            return {(0, p.check.digest): r for p, r in zip(again, results, strict=True)}
        by_level: dict[int, list[Check]] = {}
        for probe in probes:
            by_level.setdefault(probe.level, []).append(probe.check)
        order = sorted(by_level)
        jobs = [TreeJob(levels[level].tree, tuple(by_level[level])) for level in order]
        found = verifier.verify_queued(jobs)
        return {
            (level, check.digest): result
            for level, results in zip(order, found, strict=True)
            for check, result in zip(by_level[level], results, strict=True)
        }

    return ask


def _cached(cache: ResultCache, levels: Sequence[StackLevel]) -> Ask:
    """Probes answered from the cache alone; None as soon as one was never run."""

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult] | None:
        found: dict[tuple[int, str], CheckResult] = {}
        for probe in probes:
            result = _cached_result(cache, levels, probe)
            if result is None:
                return None
            found[(probe.level, probe.check.digest)] = result
        return found

    return ask


def _cached_result(
    cache: ResultCache, levels: Sequence[StackLevel], probe: Probe
) -> CheckResult | None:
    """A probe's result as the cache knows it: a run on the head afresh (`again`) is only
    ever its own attempt's."""
    tree, digest = levels[probe.level].tree, probe.check.digest
    return cache.get_again(tree, digest, probe.again) if probe.again else cache.get(tree, digest)


def owed_checks(
    levels: Sequence[StackLevel], cache: ResultCache, reported: Mapping[str, int] | None = None
) -> list[OwedCheck]:
    """What judging the whole stack needs next that `cache` does not know: the top's united
    checks, or a bisection's probes — at every level of each open range at once, so one
    fan-out finds each first failing level. [] when the stack is judged from the cache, or
    when only runs on the head itself are owed (those stay on the integrating runner: they
    ask whether the environment changed under it). Each is expected to take its last
    recorded duration, else what its lane said it took (`reported`, by check id), else
    DEFAULT_CHECK_MS."""
    said = reported or {}
    owed: dict[tuple[str, str], OwedCheck] = {}

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult] | None:
        found: dict[tuple[int, str], CheckResult] = {}
        for probe in probes:
            tree, digest = levels[probe.level].tree, probe.check.digest
            result = _cached_result(cache, levels, probe)
            if result is not None:
                found[(probe.level, digest)] = result
            elif not probe.again:
                expected = cache.duration_ms(digest)
                if expected is None:
                    expected = said.get(probe.check.check_id, DEFAULT_CHECK_MS)
                owed[(tree, digest)] = OwedCheck(
                    tree=tree, check_id=probe.check.check_id, descriptor_digest=digest,
                    expected_ms=expected,
                )  # fmt: skip
        return found if len(found) == len(probes) else None

    every_level = len(levels) * max(1, len(united_checks(levels)))
    judge_stack(levels, ask, every_level)
    return list(owed.values())


def _judged_prefix(
    levels: Sequence[StackLevel],
    cache: ResultCache,
    workers: int,
    used: dict[tuple[int, str, int], CheckResult],
) -> tuple[int, StackJudgement | None]:
    """The highest level whose stack (it and every level below) the cache can judge: the top
    the background checks verified, though more lanes ended since."""
    for top in range(len(levels) - 1, 0, -1):  # level 0 is the head, never a top
        level = levels[top]
        if any(cache.get(level.tree, check.digest) is None for check in level.checks):
            continue  # never a top: its own checks did not all run on its tree
        tried: dict[tuple[int, str, int], CheckResult] = {}
        judged = judge_stack(levels[: top + 1], _counted(_cached(cache, levels), tried), workers)
        if judged is not None:
            used.update(tried)
            return top, judged
    return -1, None


def _with_judgement(
    chain: list[CandidateFacts],
    stacked: Sequence[int],
    levels: Sequence[StackLevel],
    judged: StackJudgement,
) -> list[CandidateFacts]:
    """The chain with each stacked lane's results: from the top's tree when the stack passed;
    a culprit's failing checks on its own candidate when it did not (the others have none)."""
    judged_chain = list(chain)
    top_tree = levels[-1].tree if len(levels) > 1 else None
    for level, index in enumerate(stacked, start=1):
        entry = chain[index]
        own = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
        match judged:
            case StackPassed(results=results):
                found = tuple(_named(results[check.digest], check.check_id) for check in own)
                judged_chain[index] = replace(entry, results=found, judged_on=top_tree)
            case StackFailed(culprits=culprits) if level in culprits:
                judged_chain[index] = _culprit(entry, own, culprits[level], levels[level].tree)
    return judged_chain


def stack_record(
    observed: ObservedStack, verifier: Verifier, ran_here: bool, on_runners: int = 0
) -> StackRecord | None:
    """What a judged chain says of its stack, for the log and the job summary; None when no
    lane of it was judged (nothing ran, nothing was found). `ran_here`: the pass ran the
    checks itself (the verifier counted them); else `imm run`'s background worker ran them,
    and every result the judgement used that was not carried over is one of its runs."""
    # of what the judgement used: verify jobs' verdicts (`on_runners`), passes carried over,
    # and the runs of this pass (`ran_here`) or of `imm run`'s background worker
    if ran_here:
        on_runners = min(on_runners, max(0, observed.probes - verifier.runs))
        check_runs = verifier.runs
        carried = max(0, observed.probes - verifier.runs - on_runners)
    else:
        carried = observed.carried
        on_runners = min(on_runners, max(0, observed.probes - carried))
        check_runs = observed.probes - carried - on_runners
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
    lanes = tuple(entry.task_id for entry in chain if _verifiable(entry))
    return StackRecord(lanes, check_runs, culprits, carried, on_head, on_runners)


def _culprit(
    entry: CandidateFacts,
    own: Sequence[Check],
    failed: Sequence[tuple[Check, CheckResult]],
    tree: str,
) -> CandidateFacts:
    """A culprit's failing results under the ids of its own checks that share their
    descriptor, or under the id of the check it broke when none does."""
    results: list[CheckResult] = []
    also: list[Check] = []
    for check, result in failed:
        mine = [c for c in own if c.digest == check.digest]
        if not mine:
            also.append(check)
        results += [_named(result, c.check_id) for c in mine or [check]]
    return replace(entry, results=tuple(results), judged_on=tree, also_checks=tuple(also))


def _named(result: CheckResult, check_id: str) -> CheckResult:
    return (
        result if result.check_id == check_id else result.model_copy(update={"check_id": check_id})
    )


def _build(
    repo: GitRepo,
    key: CandidateKey,
    below: Sequence[str],
    intents: IntentMemo,
    judged_at: str,
) -> BuiltCandidate:
    task_id, lane_base, lane_commit, tip = key
    build = build_candidate(repo, tip, lane_base, lane_commit)
    checks: ChecksFact | None = None
    if isinstance(build, Candidate):
        checks = candidate_checks(repo, judged_at, task_id=task_id, below=below, intents=intents)
    change = tuple(changed_entries(repo, lane_base, lane_commit))
    links = tree_links(repo, build.commit, change) if isinstance(build, Candidate) else None
    return BuiltCandidate(build, checks, change, links)


def _verifiable(entry: CandidateFacts) -> bool:
    return (
        isinstance(entry.build, Candidate)
        and isinstance(entry.checks, ChecksFound)
        and refusal_of(entry) is None
    )


_CHECK_FILES: dict[tuple[str, tuple[str, ...]], Mapping[str, frozenset[str]]] = {}


def check_files(
    repo: GitRepo, state: BatchRunState, intents: IntentMemo
) -> Mapping[str, frozenset[str]]:
    """The repository paths a task's check runs as its executable or names as an argument,
    each with the tasks whose checks name it: a lane may add, change or remove such a path —
    or anything below it, when it is a folder — only when its own task's check names it
    (issue 28 #5). Whatever the path's state at the plan's commit (issue 42 #2): the test a
    task's own lane writes in this batch is its task's too. Made once per plan commit: a pass
    asks for it on every round."""
    tasks = tuple(child.task_id for child in state.children)
    key = (state.judged_at, tasks)
    known = _CHECK_FILES.get(key)
    if known is not None:
        return known
    named: dict[str, set[str]] = {}
    for task in tasks:
        found = _owned_checks(repo, state.judged_at, [task], intents)
        for check in found.checks if isinstance(found, ChecksFound) else ():
            for path in named_paths(check.descriptor.command):
                named.setdefault(path, set()).add(task)
    files = {path: frozenset(owners) for path, owners in named.items()}
    if len(_CHECK_FILES) > 64:
        _CHECK_FILES.clear()
    _CHECK_FILES[key] = files
    return files


def plan_paths(state: BatchRunState, config_file: str) -> frozenset[str]:
    """The files what this batch is judged by comes from: its tasks' intents, its initiative
    (when a file carries it) and the repository config. No lane may change them."""
    paths = {intent_path(child.task_id) for child in state.children} | {config_file}
    carried_in = carrier_file(state.carrier)
    if carried_in is not None:
        paths.add(carried_in)
    return frozenset(paths)


def candidate_checks(
    repo: GitRepo,
    judged_at: str,
    *,
    task_id: str,
    below: Sequence[str],
    intents: IntentMemo | None = None,
) -> ChecksFact:
    """The descriptors a candidate must pass (SPEC §5.4): the child's acceptance plus that of
    every task whose change the tree below it holds (`below`: every integrated task and the
    lanes stacked under it — not only the siblings landed since its lane base, since a lane
    whose base holds a task can break it), read from the intents at `judged_at`, the commit
    the batch's plan was made from — never from the candidate, whose tree a lane wrote (a
    docs lane could weaken a sibling's check there; issue 21)."""
    found = _owned_checks(repo, judged_at, [task_id, *below], intents)
    if isinstance(found, ChecksFound) and not found.checks:
        return ChecksMissing(None, "none")
    return found


def _owned_checks(
    repo: GitRepo, judged_at: str, owners: Sequence[str], intents: IntentMemo | None
) -> ChecksFact:
    """The acceptance checks of `owners`, in order. The intents are found by blob id in one
    read of their folder and parsed once per blob (`intents`): the candidates of a chain, and
    the passes of a batch, share nearly all of their intent files."""
    memo: IntentMemo = {} if intents is None else intents
    folders: dict[str, Mapping[str, str]] = {}
    checks: list[Check] = []
    for owner in owners:
        folder, _, name = intent_path(owner).rpartition("/")
        if folder not in folders:
            folders[folder] = repo.folder_files(judged_at, folder) or {}
        blob = folders[folder].get(name)
        if blob is None:
            return ChecksMissing(owner, "absent")
        found = memo.get((owner, blob))
        if found is None:
            found = _intent_checks(owner, repo.read_blob(blob))
            memo[(owner, blob)] = found
        if isinstance(found, ChecksMissing):
            return found
        checks.extend(found)
    return ChecksFound(tuple(checks))


def _intent_checks(owner: str, body: bytes | None) -> IntentChecks:
    if body is None:  # a link, say: no intent
        return ChecksMissing(owner, "absent")
    try:
        intent = TaskIntent.model_validate_json(body.decode("utf-8", "surrogateescape"))
        return tuple(
            Check(f"{owner}:{item.id}", parse_descriptor(item.verification))
            for item in intent.acceptance
        )
    except (ValidationError, ValueError) as error:
        return ChecksMissing(owner, "unreadable", str(error))
