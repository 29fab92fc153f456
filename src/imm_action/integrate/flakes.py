"""Flake-safe blame (issue 61, ADR 0071), pure: a failure is a lane's only when it is seen again.

A check that fails on a tree is run there again before its failure counts: once on a stack's
top, up to FLAKE_RERUNS times on a level bisection is about to blame, and as often on the base
or the batch head before the batch waits for a person. A rerun that passes makes the failure
flaky, never a lane's: the passing rerun is the tree's result (the move goes on only when a
rerun passed), and the tests that failed and then passed — the check's id where it reports no
tests — are flaky for the rest of the batch: their later failures get every rerun. Before a
lane is parked, what failed on every run of its candidate is run afresh on its parent, once —
up to FLAKE_RERUNS times for tests seen to flip: failing there too, it is not the lane's. Tests
the config lists in `flaky_tests` are reported when they fail and never block.

Reruns cost runs only where a check failed: on honest lanes, with a test failing one run in
twenty, about one rerun per twenty runs of that check. A culprit's trial runs its failing
tests alone, where its check's report named them and its parent passes them alone (ADR 0073:
a suite's failing test, not the suite): failing alone on each of ALONE_RERUNS runs, the
failure is seen again; passing alone once, whole runs judge it, as they do on the top, the
head and the base."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from imm_action.model.ledger import named_tests
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check

# Reruns of a failure before a lane is parked for it (or the batch waits for a person): a test
# failing one run in two blames an innocent lane one time in 2 ** (FLAKE_RERUNS + 1) at worst,
# and only when it also passes its parent's reruns.
FLAKE_RERUNS: Final = 3
# Runs of a failure's tests alone before a lane is parked for it (ADR 0073): two more than
# whole reruns, since a flaky test passing alone once sends the trial to whole runs — its
# chance to blame an innocent lane grows by p ** ALONE_RERUNS (p: how often it fails), at most
# a quarter more at one run in two.
ALONE_RERUNS: Final = FLAKE_RERUNS + 2


@dataclass(frozen=True)
class FlakeRules:
    """What a judgement knows of flaky tests before it starts: those seen to flip earlier in
    the batch (`known`, the state's) and those the config lists (`listed`, never blocking)."""

    known: frozenset[str] = frozenset()
    listed: frozenset[str] = frozenset()


NO_FLAKES: Final = FlakeRules()


@dataclass
class Flips:
    """What a judgement learns of flaky tests: those known before (the batch state's), and each
    flip it saw: a test's id (or a check's) on a level's tree, once however often it is asked."""

    known: set[str] = field(default_factory=set)
    _seen: dict[tuple[int, str], None] = field(default_factory=dict)

    def flipped(self, level: int, tests: Collection[str]) -> None:
        for test in sorted(tests):
            self._seen[(level, test)] = None
            self.known.add(test)

    @property
    def seen(self) -> tuple[str, ...]:
        """A test's id per tree it flipped on."""
        return tuple(test for _, test in self._seen)

    def any_known(self, suspects: Collection[str]) -> bool:
        return any(test in self.known for test in suspects)


def suspects_of(check: Check, result: CheckResult) -> frozenset[str]:
    """What a failure is about: the tests its report says failed, else the check itself."""
    failing = result.tests.failing() if result.tests is not None else []
    return frozenset(failing) if failing else frozenset({check.check_id})


def still_failing(check: Check, suspects: frozenset[str], rerun: CheckResult) -> frozenset[str]:
    """Of `suspects`, those a failing rerun fails again: where neither names tests, the check
    itself; a test the rerun reports passing flipped."""
    if rerun.passed:
        return frozenset()
    if suspects == {check.check_id} or rerun.tests is None:
        return suspects
    again = suspects_of(check, rerun)
    return suspects & again if again != {check.check_id} else suspects


@dataclass(frozen=True)
class Confirmed:
    """How a failure fared on its reruns: `suspects`, what failed on every run (none: it was
    flaky), and the tree's result — the passing rerun where one passed, the last rerun where
    what failed first did not fail again, else the first run."""

    result: CheckResult
    suspects: frozenset[str]
    alone: bool = False  # seen again on every run of its tests alone (`steady_alone`)

    @property
    def flaky(self) -> bool:
        return not self.suspects


@dataclass(frozen=True)
class Rerun:
    """A check run again on a level's tree: its `attempt`-th rerun there, of only the tests
    `alone` names where it names some (a runner that cannot run them alone runs them all)."""

    level: int
    check: Check
    attempt: int
    alone: frozenset[str] = frozenset()

    @property
    def key(self) -> int:
        """What keeps the run apart from every other rerun of the check on the tree: asked
        again, it is the same run — the `attempt`, negated for a run of its tests alone."""
        return -self.attempt if self.alone else self.attempt


# Reruns of checks: the reruns of one call may run side by side; None while one is not known.
RunAgain = Callable[[Sequence[Rerun]], list[CheckResult] | None]


def alone_tests(check: Check, suspects: frozenset[str], first: CheckResult) -> frozenset[str]:
    """The tests a rerun may run alone: the suspects where they are tests of a JUnit report
    (pytest's: the runner that can run them alone), none where the failure is the check's
    own (its report named no failing test) or its runner another (TAP, jest). A runner that
    cannot run them alone runs them all: that run is never taken for a whole run (it may be
    a runner refusing the plugin), only for what it shows of the tests."""
    junit = first.tests is not None and first.tests.source == "junit"
    return _named(check, suspects) if junit else frozenset()


def _named(check: Check, suspects: frozenset[str]) -> frozenset[str]:
    return frozenset() if suspects == {check.check_id} else suspects


def fails_any(result: CheckResult, tests: frozenset[str]) -> bool:
    """Whether a run of `tests` alone settles that a failure is seen again: one of them
    failed."""
    failing = result.tests.failing() if result.tests is not None else []
    return not result.passed and any(test in tests for test in failing)


def passes_every(result: CheckResult, tests: frozenset[str]) -> bool:
    """Whether a run of `tests` alone settles that they pass on that tree: each of them ran
    and passed (a test failing alone may need the suite around it: the whole check says)."""
    ran = result.tests.tests if result.tests is not None else {}
    return result.passed and all(ran.get(test) == "passed" for test in tests)


def _settled(
    run_again: RunAgain,
    reruns: Sequence[Rerun],
    settles: Callable[[CheckResult, frozenset[str]], bool],
) -> list[CheckResult] | None:
    """Each rerun's result: the run of its tests alone where that `settles` the question, else
    the whole check's, as the same attempt — also where the run asked for them alone did not
    run them alone (`alone_tests`: it is never taken for a whole run). A result of tests
    alone is never a tree's verdict."""
    found = run_again(reruns)
    if found is None:
        return None
    whole = [i for i, (rerun, result) in enumerate(zip(reruns, found, strict=True))
             if rerun.alone and not (result.ran_only and settles(result, rerun.alone))]  # fmt: skip
    if whole:
        again = run_again([Rerun(reruns[i].level, reruns[i].check, reruns[i].attempt)
                           for i in whole])  # fmt: skip
        if again is None:
            return None
        for i, result in zip(whole, again, strict=True):
            found[i] = result
    return found


@dataclass(frozen=True)
class Trial:
    """A failure to confirm: `first` failed on `level`'s tree, to be run there again up to
    `reruns` times; `focus`: the tests a search hunts (what failed on the top on every run),
    where `first` fails any of them."""

    level: int
    check: Check
    first: CheckResult
    reruns: int
    focus: frozenset[str] = frozenset()
    # its failing tests may be run alone first, ALONE_RERUNS times (a fair A/B trial of the
    # lane: its parent passes them alone, `fairly_alone`): failing alone on every one, the
    # failure is seen again; passing alone once, the trial is judged by whole runs as before
    alone: bool = False

    @property
    def suspects(self) -> frozenset[str]:
        """What the trial confirms: what `first` fails of `focus`, else all it fails."""
        failing = suspects_of(self.check, self.first)
        return (failing & self.focus) or failing


def confirm_all(
    trials: Sequence[Trial], run_again: RunAgain, flips: Flips
) -> list[Confirmed] | None:
    """Each trial run again, attempt by attempt — the reruns of one attempt side by side —
    each stopping as soon as what failed first passes; a trial that may run its tests alone
    does that first (`steady_alone`). None while a rerun is not known."""
    steady = steady_alone(trials, run_again)
    if steady is None:
        return None
    suspects = [trial.suspects for trial in trials]
    settled: list[Confirmed | None] = [
        Confirmed(trial.first, trial.suspects, alone=True) if alone else None
        for trial, alone in zip(trials, steady, strict=True)
    ]
    for attempt in range(1, max((t.reruns for t in trials), default=0) + 1):
        pending = [i for i, t in enumerate(trials) if settled[i] is None and attempt <= t.reruns]
        if not pending:
            break
        reruns = run_again([Rerun(trials[i].level, trials[i].check, attempt) for i in pending])
        if reruns is None:
            return None
        for i, rerun in zip(pending, reruns, strict=True):
            trial = trials[i]
            kept = still_failing(trial.check, suspects[i], rerun)
            flips.flipped(trial.level, suspects[i] - kept)
            if rerun.passed:
                flaky = named_tests(sorted(suspects[i]))
                settled[i] = Confirmed(rerun.model_copy(update={"flaky_tests": flaky}), frozenset())
            elif not kept:
                settled[i] = Confirmed(rerun, frozenset())
            else:
                suspects[i] = kept
    return [found or Confirmed(trials[i].first, suspects[i]) for i, found in enumerate(settled)]


def steady_alone(trials: Sequence[Trial], run_again: RunAgain) -> list[bool] | None:
    """Per trial, whether its failing tests, run alone ALONE_RERUNS times (the runs of one
    attempt side by side), failed on every run: False for a trial that may not run them
    alone, and as soon as one run does not fail them (a test may fail only beside others, or
    be flaky: whole runs judge it then, so a flaky test gets no more chances to blame a lane
    than ALONE_RERUNS runs alone add). None while a run is not known."""
    tests = [alone_tests(t.check, t.suspects, t.first) if t.alone else frozenset() for t in trials]
    steady = [bool(alone) for alone in tests]
    for attempt in range(1, ALONE_RERUNS + 1):
        pending = [i for i, still in enumerate(steady) if still]
        if not pending:
            break
        found = run_again([Rerun(trials[i].level, trials[i].check, attempt, tests[i])
                           for i in pending])  # fmt: skip
        if found is None:
            return None
        for i, result in zip(pending, found, strict=True):
            # (a run not of them alone — another runner, or one refusing the plugin — settles
            # nothing: whole runs judge)
            steady[i] = bool(result.ran_only) and fails_any(result, tests[i])
    return steady


def hunted(suspects: frozenset[str], flips: Flips) -> frozenset[str]:
    """What a bisection hunts of the tests that failed on every run on the top: those never
    seen to flip, where there are any — a flaky test failing beside a broken one must not lead
    the search to a level it happened to fail on."""
    steady = frozenset(test for test in suspects if test not in flips.known)
    return steady or suspects


@dataclass(frozen=True)
class OnParent:
    """What failed on every run of a level (`suspects`, of `check`), to be run afresh on its
    `parent`; `alone`: as tests alone, where the parent passed them alone already."""

    parent: int
    check: Check
    suspects: frozenset[str]
    alone: bool = False


def fairly_alone(
    trials: Sequence[Trial], has_parent: Sequence[bool], run_again: RunAgain
) -> list[Trial] | None:
    """The trials of candidates, each to run its failing tests alone where that is a fair A/B
    trial of its lane: where its parent passes them alone (one run each, side by side), what
    differs is the lane alone; where the parent never runs the check (the lane's own test),
    there is nothing else to tell. A test failing alone on the parent too needs the suite
    around it: only whole runs judge it. None while a run is not known."""
    tests = [alone_tests(t.check, t.suspects, t.first) if has else frozenset()
             for t, has in zip(trials, has_parent, strict=True)]  # fmt: skip
    runs = [Rerun(t.level - 1, t.check, 1, alone) for t, alone in zip(trials, tests, strict=True)
            if alone]  # fmt: skip
    found = run_again(runs) if runs else []
    if found is None:
        return None
    results = iter(found)
    return [replace(trial, alone=not has or (bool(alone) and passes_every(next(results), alone)))
            for trial, has, alone in zip(trials, has_parent, tests, strict=True)]  # fmt: skip


def not_on_parent(
    failures: Sequence[OnParent], run_again: RunAgain, flips: Flips
) -> list[frozenset[str]] | None:
    """Of what failed on every run of each level, what does not fail on that level's parent,
    where bisection (or the head's recorded verdict) saw it pass: run there afresh — once, or
    up to FLAKE_RERUNS times for tests seen to flip — the runs of one attempt side by side.
    What fails there is no lane's: the environment changed, or the test is flaky. None while a
    run is not known."""
    left = [failure.suspects for failure in failures]
    tries = [FLAKE_RERUNS if flips.any_known(failure.suspects) else 1 for failure in failures]
    for attempt in range(1, max(tries, default=0) + 1):
        pending = [i for i in range(len(failures)) if left[i] and attempt <= tries[i]]
        if not pending:
            break
        asked = [Rerun(failures[i].parent, failures[i].check, attempt,
                       _named(failures[i].check, left[i]) if failures[i].alone
                       else frozenset()) for i in pending]  # fmt: skip
        reruns = _settled(run_again, asked, passes_every)
        if reruns is None:
            return None
        for i, rerun in zip(pending, reruns, strict=True):
            failure = failures[i]
            again = still_failing(failure.check, left[i], rerun)
            flips.flipped(failure.parent, again)
            left[i] = left[i] - again
    return left


def forgiven(result: CheckResult, check: Check, listed: Collection[str]) -> CheckResult:
    """`result`, passed, when every test it fails is listed in `flaky_tests` (or the check
    itself is) and nothing else failed it (its time, output, tree, or a test lost another
    way): reported, never blocking."""
    if result.passed or not listed:
        return result
    if check.check_id in listed:
        return result.model_copy(update={"passed": True, "flaky_tests": [check.check_id]})
    failing = result.tests.failing() if result.tests is not None else []
    if not failing or any(test not in listed for test in failing):
        return result
    if result.timed_out or result.output_limited or result.changed_outside or result.error:
        return result
    other_losses = [lost for lost in result.lost_tests if not lost.endswith(" (failed)")
                    and not lost.endswith(" (error)")]  # fmt: skip
    if other_losses:
        return result
    return result.model_copy(
        update={"passed": True, "lost_tests": [], "flaky_tests": named_tests(failing)}
    )
