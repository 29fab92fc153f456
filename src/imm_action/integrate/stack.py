"""Stack verification and bisection (SPEC §5.4, decision 0037), as pure functions.

The ready lanes of a pass are built one on another on the batch head. Level 0 is the batch head
itself, judged by the checks of every task the branch already holds; level `i` is the
candidate of the `i`-th lane, whose tree holds every lane below it too, judged by its own checks
and those of every level below (SPEC §5.4: a lane whose base already holds a task can break
it). The checks of every level are united (one run per descriptor digest) and run once, on the
top's tree. All pass: every lane of the stack may land. A check that fails on the top is
bisected alone over the levels to the first at which it fails; those levels are the culprits.
A check that fails on the head itself is run there once more and, failing again, is the
head's (`StackFailed.on_head`): flaky, or the environment changed, never a lane's fault.
Nothing here runs a check: `ask` does (or, for `imm run`'s passes, only reads the results its
background worker found).

Monotony is assumed, as by every bisecting merge queue: a check that fails at some level fails
at every level above it. Where that is false (a later lane fixes what an earlier broke), the
search still ends at a level where the check passed just below and fails at it; and a stack
whose top passes lands whole, the fix with the breakage (decision 0037)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from imm_action.integrate.ledger import judged_against
from imm_action.model.ledger import TestLedger
from imm_action.model.outcome import CheckResult
from imm_action.text import listed
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
    """One descriptor on one level's tree. `again` 1 or 2: its first or second run on the
    batch head whatever is known there (a check of the tasks the branch holds that fails on
    the top is tried on the head itself, twice, before anyone is blamed)."""

    level: int
    check: Check
    again: int = 0


# The results of some probes, by (level, digest); None when any of them is not known (a pass
# that runs no check and finds them missing in the cache: the stack waits).
Ask = Callable[[Sequence[Probe]], Mapping[tuple[int, str], CheckResult] | None]


@dataclass(frozen=True)
class StackPassed:
    """The top passed every check of every level: the stack lands whole."""

    results: Mapping[str, CheckResult]  # by descriptor digest, on the top's tree


@dataclass(frozen=True)
class StackFailed:
    """The levels at which a failing check first fails, each with those checks' results there
    (never level 0), and the checks that failed twice on the head itself (`on_head`)."""

    culprits: Mapping[int, tuple[tuple[Check, CheckResult], ...]]
    on_head: tuple[tuple[Check, CheckResult], ...] = ()


StackJudgement = StackPassed | StackFailed


def united_checks(levels: Sequence[StackLevel]) -> dict[str, Check]:
    """Every level's checks, one per descriptor digest (the first level naming it wins)."""
    united: dict[str, Check] = {}
    for level in levels:
        for check in level.checks:
            united.setdefault(check.digest, check)
    return united


def judge_stack(levels: Sequence[StackLevel], ask: Ask, workers: int = 1) -> StackJudgement | None:
    """Whether the stack lands whole, or which of its levels are culprits; None when `ask`
    does not know a result it needs. `levels[0]` is the batch head, the rest its lanes."""
    if len(levels) < 2:
        return StackPassed({})
    ask = against_head(levels, ask)
    top = len(levels) - 1
    united = united_checks(levels)
    on_top = ask([Probe(top, check) for check in united.values()])
    if on_top is None:
        return None
    failing = [digest for digest in united if not on_top[(top, digest)].passed]
    if not failing:
        return StackPassed({digest: on_top[(top, digest)] for digest in united})
    first_level = _first_levels(levels)
    # per failing digest: the first failing level lies in [low, high]; `high` fails
    ranges = {digest: (first_level[digest], top) for digest in failing}
    found: dict[tuple[int, str], CheckResult] = {
        (top, digest): on_top[(top, digest)] for digest in failing
    }
    held = [digest for digest in failing if first_level[digest] == 0]
    # one that lost tests the head passed is a lane's doing by construction: the head's own
    # run is what it lost them against, so it is not tried on the head again
    again = [united[d] for d in held if not lost_only(on_top[(top, d)])]
    on_head = _tried_on_head(again, ask)
    if on_head is None:
        return None
    for digest in held:
        if digest in on_head:
            del ranges[digest]
        else:  # the head passes it: a lane of the stack broke it
            ranges[digest] = (1, top)
    while open_ranges := [d for d, (low, high) in ranges.items() if low < high]:
        probes = [
            Probe(level, united[digest])
            for digest in open_ranges
            for level in probe_levels(*ranges[digest], max(1, workers // len(open_ranges)))
        ]
        answers = ask(probes)
        if answers is None:
            return None
        found.update(answers)
        for digest in open_ranges:
            ranges[digest] = _narrowed(ranges[digest], digest, answers)
    culprits: dict[int, list[tuple[Check, CheckResult]]] = {}
    for digest, (_, level) in ranges.items():
        culprits.setdefault(level, []).append((united[digest], found[(level, digest)]))
    return StackFailed(
        {level: tuple(pairs) for level, pairs in sorted(culprits.items())},
        tuple((united[digest], result) for digest, result in on_head.items()),
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
        return {
            (level, digest): result
            if level == 0
            else judged_against(result, baseline.get(digest), levels[level].retired)
            for (level, digest), result in answers.items()
        }

    return judged


def _tried_on_head(checks: Sequence[Check], ask: Ask) -> dict[str, CheckResult] | None:
    """Of failing checks of tasks the head holds, those that fail on the head itself, run
    there afresh and, failing, once more: nobody's lane's (flaky, or the environment changed).
    A pass the cache holds for the head is not trusted here: the environment may have
    changed since. None when a result is not known."""
    failed: dict[str, CheckResult] = {}
    for attempt in (1, 2):
        if not checks:
            break
        again = ask([Probe(0, check, again=attempt) for check in checks])
        if again is None:
            return None
        failed = {c.digest: again[(0, c.digest)] for c in checks if not again[(0, c.digest)].passed}
        checks = [check for check in checks if check.digest in failed]
    return failed


def probe_levels(low: int, high: int, count: int) -> list[int]:
    """`count` levels spread evenly over [low, high): together with `high` (known to fail)
    they cut the range into `count + 1` parts of nearly equal size."""
    span = high - low
    count = min(count, span)
    return sorted({low + (span * (i + 1)) // (count + 1) for i in range(count)})


def _narrowed(
    bounds: tuple[int, int], digest: str, answers: Mapping[tuple[int, str], CheckResult]
) -> tuple[int, int]:
    low, high = bounds
    for level in sorted(level for level, d in answers if d == digest and low <= level < high):
        if answers[(level, digest)].passed:
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


@dataclass(frozen=True)
class Culprit:
    task_id: str
    checks: tuple[str, ...]  # the check ids that first failed on its candidate
    candidate: str


@dataclass(frozen=True)
class StackRecord:
    """What one round of integration did, for the log and the job summary: the lanes verified
    as one stack, the descriptors it ran, and what bisection found."""

    lanes: tuple[str, ...]
    check_runs: int
    culprits: tuple[Culprit, ...] = ()
    carried: int = 0  # checks whose last pass was carried over (nothing they read changed)
    on_head: tuple[str, ...] = ()  # check ids that failed twice on the batch head itself
    on_runners: int = 0  # results verify jobs on other runners found (decision 0054)

    def line(self) -> str:
        runs = f"{self.check_runs} check run{'' if self.check_runs == 1 else 's'}"
        if self.on_runners:
            runs += f" here, {self.on_runners} on verify runners"
        if self.carried:
            runs += f", {self.carried} carried over"
        count = len(self.lanes)
        head = (
            f"verified {count} lane{'' if count == 1 else 's'} as one stack ({listed(self.lanes)})"
        )
        if self.on_head:
            return (
                f"{head}: {runs}; {listed(self.on_head)} failed twice on the batch head "
                "itself, so no lane is blamed"
            )
        if not self.culprits:
            return f"{head}: {runs}, every check passed on its top"
        found = "; ".join(
            f"{c.task_id} ({', '.join(c.checks)} first failed on {c.candidate[:12]})"
            for c in self.culprits
        )
        return f"{head}: {runs}; bisection found {found}"
