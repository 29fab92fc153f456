"""Stack verification and bisection (SPEC §5.4, decision 0037), as pure functions.

The ready lanes of a pass are built one on another on the batch head. Level 0 is the batch head
itself, judged by the checks of every task the branch already holds; level `i` is the
candidate of the `i`-th lane, whose tree holds every lane below it too, judged by its own checks
and those of every level below (SPEC §5.4: a lane whose base already holds a task can break
it). The checks of every level are united (one run per descriptor digest) and run once, on the
top's tree. All pass: every lane of the stack may land. A check that fails on the top is run
there again (a flake costs a rerun, not a bisection: integrate/flakes.py); failing again, it is
bisected alone over the levels to the first at which it fails, whose lane is a culprit once the
failure is seen again there and not on its parent. A check that fails on the head itself (its
recorded verdict serves) and on every rerun there is the head's (`StackFailed.on_head`): a
flaky branch, or the environment changed, never a lane's fault. Nothing here runs a check:
`ask` does (or, for `imm run`'s passes, only reads the results its
background worker found).

Monotony is assumed, as by every bisecting merge queue: a check that fails at some level fails
at every level above it. Where that is false (a later lane fixes what an earlier broke), the
search still ends at a level where the check passed just below and fails at it; and a stack
whose top passes lands whole, the fix with the breakage (decision 0037)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from imm_action.integrate.flakes import (
    FLAKE_RERUNS,
    NO_FLAKES,
    FlakeRules,
    Flips,
    OnParent,
    Rerun,
    RunAgain,
    Trial,
    confirm_all,
    fairly_alone,
    forgiven,
    hunted,
    not_on_parent,
    still_failing,
    suspects_of,
)
from imm_action.integrate.ledger import judged_against
from imm_action.model.ledger import TestLedger
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check


@dataclass(frozen=True)
class StackLevel:
    """One level of the stack: the head's tree or a lane's candidate's, and the checks it is
    judged by (every integrated task's; for a lane, its own and those of the lanes below).
    The head's level holds the test ledgers its checks reported there (`baseline`, by
    digest); a lane's, the tests it and the lanes below it retire (issue 58)."""

    tree: str
    checks: tuple[Check, ...]
    baseline: Mapping[str, TestLedger] = field(default_factory=dict)
    retired: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Probe:
    """One descriptor on one level's tree. `again`: one of its reruns there, whatever is known
    (a failure is run again before it is anyone's: integrate/flakes.py) — N for the N-th, -N
    for the N-th of the tests `alone` names, run alone (flakes.Rerun.key)."""

    level: int
    check: Check
    again: int = 0
    alone: frozenset[str] = frozenset()


# The results of some probes, by (level, digest); None when any of them is not known (a pass
# that runs no check and finds them missing in the cache: the stack waits).
Ask = Callable[[Sequence[Probe]], Mapping[tuple[int, str], CheckResult] | None]

# Told the levels bisection found first failing, before their lanes' trials (issue 61): were
# they parked, the stack would go on without them — a caller may verify that stack meanwhile,
# so a culprit costs the lanes above it no second round.
Suspected = Callable[[frozenset[int]], None]


@dataclass(frozen=True)
class StackPassed:
    """The top passed every check of every level: the stack lands whole."""

    results: Mapping[str, CheckResult]  # by descriptor digest, on the top's tree
    flaky: tuple[str, ...] = ()  # a test's id (or a check's) per flip seen judging it


@dataclass(frozen=True)
class StackFailed:
    """The levels at which a failing check first fails, each with those checks' results there
    (never level 0), and the checks that failed on the head itself, or on the top and on every
    rerun with no lane to blame (`on_head`: nobody's lane's)."""

    culprits: Mapping[int, tuple[tuple[Check, CheckResult], ...]]
    on_head: tuple[tuple[Check, CheckResult], ...] = ()
    flaky: tuple[str, ...] = ()


StackJudgement = StackPassed | StackFailed


def united_checks(levels: Sequence[StackLevel]) -> dict[str, Check]:
    """Every level's checks, one per descriptor digest (the first level naming it wins)."""
    united: dict[str, Check] = {}
    for level in levels:
        for check in level.checks:
            united.setdefault(check.digest, check)
    return united


def judge_stack(
    levels: Sequence[StackLevel],
    ask: Ask,
    workers: int = 1,
    flakes: FlakeRules = NO_FLAKES,
    suspected: Suspected | None = None,
) -> StackJudgement | None:
    """Whether the stack lands whole, or which of its levels are culprits; None when `ask`
    does not know a result it needs. `levels[0]` is the batch head, the rest its lanes.
    `flakes`: the tests seen to flip earlier in the batch, and those the config lists;
    `suspected`: told the levels about to be tried as culprits."""
    if len(levels) < 2:
        return StackPassed({})
    flips = Flips(set(flakes.known))
    ask = forgiving(against_head(levels, ask), levels, flakes.listed, flips)
    top = len(levels) - 1
    united = united_checks(levels)
    on_top = ask([Probe(top, check) for check in united.values()])
    if on_top is None:
        return None
    found: dict[tuple[int, str], CheckResult] = {(top, d): on_top[(top, d)] for d in united}
    run_again = _rerun_by(ask)
    focus = _confirmed_on_top(top, united, found, run_again, flips)
    if focus is None:
        return None
    failing = [digest for digest in united if not found[(top, digest)].passed]
    if not failing:
        return StackPassed({d: found[(top, d)] for d in united}, flips.seen)
    first_level = _first_levels(levels)
    # per failing digest: the first failing level lies in [low, high]; `high` fails
    ranges = {digest: (first_level[digest], top) for digest in failing}
    held = [digest for digest in failing if first_level[digest] == 0]
    # one that lost tests the head passed is a lane's doing by construction: the head's own
    # run is what it lost them against, so it is not tried on the head again
    again = [united[d] for d in held if not lost_only(found[(top, d)])]
    on_head = _failing_on_head(again, ask, run_again, flips, focus)
    if on_head is None:
        return None
    for digest in held:
        if digest in on_head:
            del ranges[digest]
        else:  # the head passes it: a lane of the stack broke it
            ranges[digest] = (1, top)
    search = _Search(united, ask, found, first_level, workers, top, focus, suspected)
    culprits = _culprits(ranges, search, run_again, flips, on_head)
    if culprits is None:
        return None
    if not culprits and not on_head:
        return StackPassed({d: found[(top, d)] for d in united}, flips.seen)
    return StackFailed(
        {level: tuple(pairs) for level, pairs in sorted(culprits.items())},
        tuple((united[digest], result) for digest, result in on_head.items()),
        flips.seen,
    )


def lost_only(result: CheckResult) -> bool:
    """Whether a check failed for the tests it lost alone: its command ran and passed."""
    return (
        bool(result.lost_tests)
        and result.exit_code == 0
        and not (
            result.timed_out or result.output_limited or result.changed_outside or result.error
        )
    )


def against_head(levels: Sequence[StackLevel], ask: Ask) -> Ask:
    """`ask`, its answers on a lane's level judged against the tests each check reported on
    the head (issue 58): a test that passed there and does not here fails the check."""
    baseline = levels[0].baseline
    if not baseline:
        return ask

    def judged(probes: Sequence[Probe]) -> Mapping[tuple[int, str], CheckResult] | None:
        answers = ask(probes)
        if answers is None:
            return None
        return {  # (a run of some tests alone loses the others by design)
            (level, digest): result
            if level == 0 or result.ran_only
            else judged_against(result, baseline.get(digest), levels[level].retired)
            for (level, digest), result in answers.items()
        }

    return judged


def _confirmed_on_top(
    top: int,
    united: Mapping[str, Check],
    found: dict[tuple[int, str], CheckResult],
    run_again: RunAgain,
    flips: Flips,
) -> dict[str, frozenset[str]] | None:
    """A failure on the top run there once more — as often as bisection would, for tests seen
    to flip — before anything is bisected: a flake costs one rerun, not a bisection. Its
    passing rerun becomes the top's result. Per check still failing, what bisection hunts;
    None while a rerun is not known."""
    focus: dict[str, frozenset[str]] = {}
    trials: list[tuple[str, Trial]] = []
    for digest, check in united.items():
        result = found[(top, digest)]
        if result.passed:
            continue
        if lost_only(result):
            focus[digest] = suspects_of(check, result)
            continue
        reruns = FLAKE_RERUNS if flips.any_known(suspects_of(check, result)) else 1
        trials.append((digest, Trial(top, check, result, reruns)))
    tried = confirm_all([trial for _, trial in trials], run_again, flips)
    if tried is None:
        return None
    for (digest, trial), confirmed in zip(trials, tried, strict=True):
        found[(top, digest)] = confirmed.result
        if not confirmed.result.passed:
            failing = confirmed.suspects or suspects_of(trial.check, confirmed.result)
            focus[digest] = hunted(failing, flips)
    return focus


@dataclass(frozen=True)
class _Search:
    """What bisection searches with: the united checks, where results come from and what is
    found so far, each check's first level, and the workers each round may use."""

    united: Mapping[str, Check]
    ask: Ask
    found: dict[tuple[int, str], CheckResult]
    first_level: Mapping[str, int]
    workers: int
    top: int
    focus: Mapping[str, frozenset[str]]  # per check, the tests that failed on every top run
    suspected: Suspected | None = None


def _culprits(
    ranges: dict[str, tuple[int, int]],
    search: _Search,
    run_again: RunAgain,
    flips: Flips,
    on_head: dict[str, CheckResult],
) -> dict[int, list[tuple[Check, CheckResult]]] | None:
    """Each range bisected to its first failing level, whose lane is blamed once the failure
    is confirmed there (`_blamed`); a level where it is not is flaky, and the search goes on
    above it. A check no lane is blamed for though the top fails it goes to `on_head`."""
    found, top = search.found, search.top
    culprits: dict[int, list[tuple[Check, CheckResult]]] = {}
    told: set[frozenset[int]] = set()
    while ranges:
        if not _bisected(ranges, search):
            return None
        at = {digest: level for digest, (_, level) in ranges.items()}
        suspects = frozenset(at.values())
        if search.suspected is not None and min(suspects) < top and suspects not in told:
            told.add(suspects)  # (a top lane's stack without it is the stack below: known)
            search.suspected(suspects)
        blamed = _blamed(at, search, run_again, flips)
        if blamed is None:
            return None
        for digest, level in at.items():
            if blamed[digest]:
                culprits.setdefault(level, []).append(
                    (search.united[digest], found[(level, digest)])
                )
                del ranges[digest]
            elif level == top:  # no lane's: the top's rerun passed, or its parent fails too
                del ranges[digest]
                if not found[(top, digest)].passed:
                    on_head[digest] = found[(top, digest)]
            else:  # flaky there: the first failing level lies above it
                ranges[digest] = (level + 1, top)
    return culprits


def _bisected(ranges: dict[str, tuple[int, int]], search: _Search) -> bool:
    """Narrow every range to one level (its first failing level); False when a result it
    needs is not known. With W workers and F open searches each round probes ⌊W/F⌋ levels of
    each at once (a k-ary search). A level fails a check where it fails a test the search
    hunts (what failed on the top on every run)."""
    found = search.found
    while open_ranges := [d for d, (low, high) in ranges.items() if low < high]:
        count = max(1, search.workers // len(open_ranges))
        probes = [
            Probe(level, search.united[digest])
            for digest in open_ranges
            for level in probe_levels(*ranges[digest], count)
        ]
        answers = search.ask(probes)
        if answers is None:
            return False
        for key, result in answers.items():
            found.setdefault(key, result)  # a rerun's pass, once found, stays the level's
        for digest in open_ranges:
            check, focus = search.united[digest], search.focus[digest]
            failing = {
                level: bool(still_failing(check, focus, result))
                for (level, d), result in found.items()
                if d == digest
            }
            ranges[digest] = _narrowed(ranges[digest], failing)
    return True


def _blamed(
    at: Mapping[str, int], search: _Search, run_again: RunAgain, flips: Flips
) -> dict[str, bool] | None:
    """Per check, whether the lane at the level bisection found it first failing (`at`)
    broke it: the failure is seen again on every rerun there — of its tests alone, where its
    parent passes them alone (flakes.fairly_alone) — and not on a fresh run of its parent,
    more for tests seen to flip (a parent below the check's first level never ran it: the
    lane's own test, `own`). False when what failed there passed a rerun (that rerun becomes
    its result) or fails on the parent too; None while a rerun is not known. The reruns of all
    of them run side by side."""
    found = search.found
    digests = list(at)
    own = {d for d in digests if at[d] - 1 < search.first_level[d]}
    trials = fairly_alone(
        [Trial(at[d], search.united[d], found[(at[d], d)], FLAKE_RERUNS, search.focus[d])
         for d in digests], [d not in own for d in digests], run_again,
    )  # fmt: skip
    if trials is None:
        return None
    tried = confirm_all(trials, run_again, flips)
    if tried is None:
        return None
    blamed: dict[str, bool] = {}
    parents: list[tuple[str, OnParent]] = []
    for digest, trial, confirmed in zip(digests, trials, tried, strict=True):
        found[(at[digest], digest)] = confirmed.result
        if confirmed.flaky:
            blamed[digest] = False
        elif digest in own:
            blamed[digest] = True
        else:
            parents.append((digest, OnParent(at[digest] - 1, trial.check, confirmed.suspects,
                                             alone=confirmed.alone)))  # fmt: skip
    kept = not_on_parent([failure for _, failure in parents], run_again, flips)
    if kept is None:
        return None
    blamed.update((digest, bool(left)) for (digest, _), left in zip(parents, kept, strict=True))
    return blamed


def _failing_on_head(
    checks: Sequence[Check],
    ask: Ask,
    run_again: RunAgain,
    flips: Flips,
    focus: dict[str, frozenset[str]],
) -> dict[str, CheckResult] | None:
    """Of failing checks of tasks the head holds, those that fail on the head itself — all
    that failed on every run on the top (`focus`) fails there too: its recorded verdict serves
    (the green-base check or the last move ran it there), and a failure there is run again up
    to FLAKE_RERUNS times. Failing on every run, it is nobody's lane's (the environment
    changed, or the branch holds a flaky test); where only some of its tests do, the lanes are
    searched for the others. None when a result is not known."""
    if not checks:
        return {}
    there = ask([Probe(0, check) for check in checks])
    if there is None:
        return None
    failing = [
        check for check in checks
        if still_failing(check, focus[check.digest], there[(0, check.digest)])
    ]  # fmt: skip
    trials = [Trial(0, check, there[(0, check.digest)], FLAKE_RERUNS, focus[check.digest])
              for check in failing]  # fmt: skip
    tried = confirm_all(trials, run_again, flips)
    if tried is None:
        return None
    failed: dict[str, CheckResult] = {}
    for check, confirmed in zip(failing, tried, strict=True):
        hunt = focus[check.digest]
        if confirmed.suspects == hunt:
            failed[check.digest] = confirmed.result
        elif confirmed.suspects:  # the head fails some of them: the lanes are searched for the rest
            focus[check.digest] = hunt - confirmed.suspects
    return failed


def _rerun_by(ask: Ask) -> RunAgain:
    """Reruns asked of `ask`, each once (the top's first is bisection's), in one question."""
    known: dict[tuple[int, str, int], CheckResult] = {}

    def run_again(reruns: Sequence[Rerun]) -> list[CheckResult] | None:
        unknown = [Probe(r.level, r.check, again=r.key, alone=r.alone) for r in reruns
                   if (r.level, r.check.digest, r.key) not in known]  # fmt: skip
        if unknown:
            answers = ask(unknown)
            if answers is None:
                return None
            for probe in unknown:
                key = (probe.level, probe.check.digest)
                known[(*key, probe.again)] = answers[key]
        return [known[(r.level, r.check.digest, r.key)] for r in reruns]

    return run_again


def forgiving(
    ask: Ask, levels: Sequence[StackLevel], listed_flaky: Collection[str], flips: Flips
) -> Ask:
    """`ask`, a failure of only the tests the config lists in `flaky_tests` passed (and
    counted among the flips: reported, never blocking)."""
    if not listed_flaky:
        return ask
    checks = united_checks(levels)

    def judged(probes: Sequence[Probe]) -> Mapping[tuple[int, str], CheckResult] | None:
        answers = ask(probes)
        if answers is None:
            return None
        judged: dict[tuple[int, str], CheckResult] = {}
        for (level, digest), result in answers.items():
            judged[(level, digest)] = forgiven(result, checks[digest], listed_flaky)
            if not result.passed and judged[(level, digest)].passed:
                flips.flipped(level, judged[(level, digest)].flaky_tests)
        return judged

    return judged


def probe_levels(low: int, high: int, count: int) -> list[int]:
    """`count` levels spread evenly over [low, high): together with `high` (known to fail)
    they cut the range into `count + 1` parts of nearly equal size."""
    span = high - low
    count = min(count, span)
    return sorted({low + (span * (i + 1)) // (count + 1) for i in range(count)})


def _narrowed(bounds: tuple[int, int], failing: Mapping[int, bool]) -> tuple[int, int]:
    low, high = bounds
    for level in sorted(level for level in failing if low <= level < high):
        if not failing[level]:
            low = level + 1
        else:
            return low, level
    return low, high


def _first_levels(levels: Sequence[StackLevel]) -> dict[str, int]:
    """Per digest, the lowest level judged by it: below that level the check is nobody's
    (a lane's own test fails, naturally, on a tree without the lane)."""
    first: dict[str, int] = {}
    for index, level in enumerate(levels):
        for check in level.checks:
            first.setdefault(check.digest, index)
    return first
