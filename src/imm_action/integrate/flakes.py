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
twenty, about one rerun per twenty runs of that check."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from imm_action.model.ledger import named_tests
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check

# Reruns of a failure before a lane is parked for it (or the batch waits for a person): a test
# failing one run in two blames an innocent lane one time in 2 ** (FLAKE_RERUNS + 1) at worst,
# and only when it also passes its parent's reruns.
FLAKE_RERUNS: Final = 3


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

    @property
    def flaky(self) -> bool:
        return not self.suspects


# The `attempt`-th reruns of checks, each (level, check) on that level's tree: the attempt's
# number keys a rerun (asked again, it is the same run), and the reruns of one call may run
# side by side; None while one is not known.
RunAgain = Callable[[int, Sequence[tuple[int, Check]]], list[CheckResult] | None]


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


def confirm_all(
    trials: Sequence[Trial], run_again: RunAgain, flips: Flips
) -> list[Confirmed] | None:
    """Each trial run again, attempt by attempt — the reruns of one attempt side by side —
    each stopping as soon as what failed first passes; None while a rerun is not known."""
    suspects = [(suspects_of(t.check, t.first) & t.focus) or suspects_of(t.check, t.first)
                for t in trials]  # fmt: skip
    settled: list[Confirmed | None] = [None] * len(trials)
    for attempt in range(1, max((t.reruns for t in trials), default=0) + 1):
        pending = [i for i, t in enumerate(trials) if settled[i] is None and attempt <= t.reruns]
        if not pending:
            break
        reruns = run_again(attempt, [(trials[i].level, trials[i].check) for i in pending])
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


def hunted(suspects: frozenset[str], flips: Flips) -> frozenset[str]:
    """What a bisection hunts of the tests that failed on every run on the top: those never
    seen to flip, where there are any — a flaky test failing beside a broken one must not lead
    the search to a level it happened to fail on."""
    steady = frozenset(test for test in suspects if test not in flips.known)
    return steady or suspects


def not_on_parent(
    failures: Sequence[tuple[int, Check, frozenset[str]]], run_again: RunAgain, flips: Flips
) -> list[frozenset[str]] | None:
    """Of what failed on every run of each level (its parent, the check, its suspects), what
    does not fail on that parent, where bisection (or the head's recorded verdict) saw it
    pass: run there afresh — once, or up to FLAKE_RERUNS times for tests seen to flip — the
    runs of one attempt side by side. What fails there is no lane's: the environment changed,
    or the test is flaky. None while a run is not known."""
    left = [suspects for _, _, suspects in failures]
    tries = [FLAKE_RERUNS if flips.any_known(suspects) else 1 for *_, suspects in failures]
    for attempt in range(1, max(tries, default=0) + 1):
        pending = [i for i in range(len(failures)) if left[i] and attempt <= tries[i]]
        if not pending:
            break
        reruns = run_again(attempt, [(failures[i][0], failures[i][1]) for i in pending])
        if reruns is None:
            return None
        for i, rerun in zip(pending, reruns, strict=True):
            parent, check, _ = failures[i]
            again = still_failing(check, left[i], rerun)
            flips.flipped(parent, again)
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
