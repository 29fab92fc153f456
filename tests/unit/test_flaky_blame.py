"""Flake-safe blame (issue 61): a lane is parked only for a failure seen on every rerun of its
candidate and not on its parent; a failure that passes a rerun is flaky, never a lane's. One
check here (the repository's suite, held by the head) reports three tests; a script says which
of them fail on each (level, rerun)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given
from hypothesis import strategies as st

from imm_action.integrate.flakes import ALONE_RERUNS, FLAKE_RERUNS, FlakeRules
from imm_action.integrate.stack import Probe, StackFailed, StackLevel, StackPassed, judge_stack
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.ledger import LedgerSource, TestLedger
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check
from tests.conftest import descriptor

GOOD, BROKEN, FLAKY = "tests/t.py::good", "tests/t.py::broken", "tests/t.py::flaky"
SUITE = Check("branch:1", parse_descriptor(descriptor(["-m", "pytest"])))

# which tests fail on (level, rerun): 0 is a level's first run
Script = Callable[[int, int], set[str]]


def _run(
    failing: set[str], alone: frozenset[str] = frozenset(), source: LedgerSource = "junit"
) -> CheckResult:
    """A run of the suite — of the tests `alone` names only, where it names some — whose
    tests in `failing` fail, reported as `source` says."""
    ran = sorted(alone) or [GOOD, BROKEN, FLAKY]
    failed = sorted(test for test in ran if test in failing)
    ledger = TestLedger(
        source=source, tests={test: "failed" if test in failed else "passed" for test in ran}
    )
    return CheckResult(
        check_id=SUITE.check_id, passed=not failed, exit_code=1 if failed else 0,
        duration_ms=1, timed_out=False, output_limited=False, changed_outside=[],
        output_tail="", tests=ledger, failed_tests=failed, ran_only=sorted(alone),
    )  # fmt: skip


class Stack:
    """A head (level 0) and `size` lanes, every level judged by the suite the head holds."""

    def __init__(
        self,
        size: int,
        script: Script,
        alone: Script | None = None,
        runs_alone: bool = True,
        source: LedgerSource = "junit",
    ) -> None:
        self.size = size
        self.script = script
        self.source = source  # how the suite reports its tests
        self.alone_script = alone or script  # which tests fail when run alone
        self.runs_alone = runs_alone  # False: a runner that runs the whole suite whatever
        self.asked: list[Probe] = []

    def levels(self) -> list[StackLevel]:
        return [StackLevel(f"tree{level}", (SUITE,)) for level in range(self.size + 1)]

    def ask(self, probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult]:
        """Each probe run as the script says its attempt goes: a run of tests alone fails
        those of them the whole suite would (the tests here need no other to pass)."""
        self.asked += probes
        return {(p.level, p.check.digest): self._run(p) for p in probes}

    def _run(self, probe: Probe) -> CheckResult:
        attempt = abs(probe.again)
        if probe.alone and self.runs_alone:
            return _run(self.alone_script(probe.level, attempt), probe.alone, self.source)
        return _run(self.script(probe.level, attempt), source=self.source)

    def reruns(self) -> list[tuple[int, int]]:
        """(level, attempt) of each rerun of the whole suite."""
        return [(p.level, p.again) for p in self.asked if p.again > 0]

    def alone(self) -> list[tuple[int, int, frozenset[str]]]:
        """(level, attempt, tests) of each rerun of some tests alone."""
        return [(p.level, -p.again, p.alone) for p in self.asked if p.again < 0]


def test_a_failure_on_the_top_that_passes_its_rerun_lands_the_stack_and_is_flaky() -> None:
    stack = Stack(8, lambda level, again: {FLAKY} if (level, again) == (8, 0) else set())
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackPassed)
    # the move goes on with the rerun that passed, which says what flipped
    (result,) = judged.results.values()
    assert result.passed
    assert result.flaky_tests == [FLAKY]
    assert judged.flaky == (FLAKY,)
    # one rerun, no bisection
    assert stack.reruns() == [(8, 1)]
    assert [probe.level for probe in stack.asked if not probe.again] == [8]


def test_a_flake_during_bisection_blames_no_lane() -> None:
    # the top fails twice; the probe at level 4 fails once and passes its rerun; the top's
    # second rerun passes: nobody broke anything
    failing = {(8, 0), (8, 1), (4, 0)}
    stack = Stack(8, lambda level, again: {FLAKY} if (level, again) in failing else set())
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackPassed)
    assert set(judged.flaky) == {FLAKY}
    assert (4, 1) in stack.reruns()


def test_a_broken_lane_is_parked_though_a_flaky_test_fails_beside_it() -> None:
    # lane 5 breaks a test; a test known to flip fails on every first run of every level
    def script(level: int, again: int) -> set[str]:
        return ({BROKEN} if level >= 5 else set()) | ({FLAKY} if again == 0 else set())

    stack = Stack(8, script)
    judged = judge_stack(stack.levels(), stack.ask, flakes=FlakeRules(known=frozenset({FLAKY})))
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [5]
    ((_, result),) = judged.culprits[5]
    assert BROKEN in result.failed_tests
    # seen on every rerun of its candidate; never seen to flip, once afresh on its parent:
    # the broken test alone each time, never the suite (the top's reruns are the suite's)
    alone = [(level, n, tests) for level, n, tests in stack.alone()]
    assert alone == [(4, 1, {BROKEN}), *((5, n, {BROKEN}) for n in range(1, ALONE_RERUNS + 1))]
    assert {level for level, _ in stack.reruns()} == {8}


def test_bisection_hunts_the_broken_test_not_a_flaky_one_failing_beside_it() -> None:
    # lane 5 breaks a test; a test known to flip happens to fail on every run of levels 2 to
    # 4 and of the top: the search follows the broken test, and lane 2 is not blamed
    def script(level: int, again: int) -> set[str]:
        return ({BROKEN} if level >= 5 else set()) | ({FLAKY} if level in {2, 3, 4, 8} else set())

    stack = Stack(8, script)
    judged = judge_stack(stack.levels(), stack.ask, flakes=FlakeRules(known=frozenset({FLAKY})))
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [5]


def test_a_flaky_test_failing_on_the_candidate_and_its_parent_is_no_lanes() -> None:
    # a test known to flip fails on every run from level 3 on, and on level 2's first rerun
    def script(level: int, again: int) -> set[str]:
        return {FLAKY} if level >= 3 or (level, again) == (2, 1) else set()

    stack = Stack(8, script)
    judged = judge_stack(stack.levels(), stack.ask, flakes=FlakeRules(known=frozenset({FLAKY})))
    assert isinstance(judged, StackFailed)
    assert judged.culprits == {}
    assert [check.check_id for check, _ in judged.on_head] == ["branch:1"]
    assert (2, 1) in stack.reruns()  # level 3's parent, run again


def test_a_failure_never_seen_to_flip_is_the_lanes_when_its_parent_passes_a_fresh_run() -> None:
    stack = Stack(8, lambda level, again: {BROKEN} if level >= 6 else set())
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [6]
    assert judged.flaky == ()
    # the failing test alone, once on the parent (it passes there: a fair trial), then on
    # the candidate ALONE_RERUNS times
    assert [(level, n) for level, n, _ in stack.alone() if level in {5, 6}] == [
        (5, 1), *((6, n) for n in range(1, ALONE_RERUNS + 1))
    ]  # fmt: skip
    assert stack.reruns() == [(8, 1)]  # the top's: a passing rerun there must be whole


def test_a_test_failing_alone_on_the_parent_too_is_judged_by_whole_runs() -> None:
    # a test that needs the suite around it fails alone everywhere; in the suite it flaked on
    # the first two runs of levels 4 to 8: no lane broke it, and none is parked
    def whole(level: int, again: int) -> set[str]:
        return {FLAKY} if level >= 4 and again <= 1 else set()

    stack = Stack(8, whole, alone=lambda level, again: {FLAKY})
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackPassed)
    assert (4, 1) in stack.reruns()  # the candidate, whole: its parent failed it alone too
    assert (3, 1, {FLAKY}) in stack.alone()


def test_a_test_broken_only_beside_others_is_still_the_lanes() -> None:
    # lane 6 breaks a test only when the suite runs around it: alone it passes everywhere
    stack = Stack(8, lambda level, again: {BROKEN} if level >= 6 else set(), alone=lambda *_: set())
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [6]
    assert judged.flaky == ()  # passing alone is no flip
    assert [n for level, n in stack.reruns() if level == 6] == [1, 2, 3]


def test_a_runner_that_cannot_run_tests_alone_is_judged_by_whole_runs() -> None:
    # a JUnit report that is not pytest's: asked to run its tests alone, it runs them all —
    # never taken for a whole run (a runner refusing the plugin answers so too), so the trial
    # runs whole as ever, after one such run on the parent and one on the candidate
    stack = Stack(8, lambda level, again: {BROKEN} if level >= 6 else set(), runs_alone=False)
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [6]
    assert stack.reruns() == [(8, 1), (6, 1), (6, 2), (6, 3), (5, 1)]
    assert [(level, n) for level, n, _ in stack.alone()] == [(5, 1), (6, 1)]


def test_a_failure_reported_in_tap_is_rerun_whole() -> None:
    stack = Stack(8, lambda level, again: {BROKEN} if level >= 6 else set(), source="tap")
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [6]
    assert stack.alone() == []


def test_a_failure_that_its_parent_fails_afresh_is_no_lanes() -> None:
    # the environment changed: the check fails from level 6 on, and on level 5 since its
    # first run; bisection saw it pass there, the fresh run does not
    stack = Stack(8, lambda level, again: {BROKEN} if level >= 6 or again else set())
    judged = judge_stack(stack.levels(), stack.ask)
    assert isinstance(judged, StackFailed)
    assert judged.culprits == {}
    assert [check.check_id for check, _ in judged.on_head] == ["branch:1"]


def test_a_test_the_config_lists_as_flaky_never_blocks_and_is_reported() -> None:
    stack = Stack(8, lambda level, again: {FLAKY})
    listed = FlakeRules(listed=frozenset({FLAKY}))
    judged = judge_stack(stack.levels(), stack.ask, flakes=listed)
    assert isinstance(judged, StackPassed)
    (result,) = judged.results.values()
    assert result.passed
    assert result.flaky_tests == [FLAKY]
    assert FLAKY in judged.flaky
    assert stack.reruns() == []


def test_a_listed_flaky_test_does_not_hide_a_broken_one_beside_it() -> None:
    def script(level: int, again: int) -> set[str]:
        return {FLAKY} | ({BROKEN} if level >= 2 else set())

    stack = Stack(8, script)
    judged = judge_stack(stack.levels(), stack.ask, flakes=FlakeRules(listed=frozenset({FLAKY})))
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [2]


@given(
    size=st.integers(min_value=1, max_value=12),
    breaker=st.none() | st.integers(min_value=1, max_value=12),
    flake_runs=st.sets(
        st.tuples(st.integers(min_value=0, max_value=12), st.integers(min_value=0, max_value=3))
    ),
    known=st.booleans(),
    needs_suite=st.booleans(),
    broken_beside=st.booleans(),
)
def test_a_lane_is_parked_only_for_a_failure_seen_on_every_run_of_its_candidate(
    size: int,
    breaker: int | None,
    flake_runs: set[tuple[int, int]],
    *,
    known: bool,
    needs_suite: bool,
    broken_beside: bool,
) -> None:
    # a broken test from `breaker` on; a flaky one failing on the runs `flake_runs` names.
    # Run alone, the flaky test fails always where it `needs_suite`, and the broken one
    # passes where it is broken only `beside` the others
    def script(level: int, again: int) -> set[str]:
        broken = {BROKEN} if breaker is not None and level >= breaker else set()
        return broken | ({FLAKY} if (level, again) in flake_runs else set())

    def alone(level: int, again: int) -> set[str]:
        found = {FLAKY} if needs_suite else script(level, again) & {FLAKY}
        return found | (set() if broken_beside else script(level, again) & {BROKEN})

    stack = Stack(size, script, alone=alone)
    flakes = FlakeRules(known=frozenset({FLAKY}) if known else frozenset())
    judged = judge_stack(stack.levels(), stack.ask, flakes=flakes)
    if breaker is not None and breaker <= size:
        # a broken lane is never let through, and is the culprit unless an earlier lane is
        # blamed for a flaky test that failed on every one of its runs
        assert isinstance(judged, StackFailed)
        assert breaker in judged.culprits or any(level < breaker for level in judged.culprits)
    assert judged is not None
    culprits = judged.culprits if isinstance(judged, StackFailed) else {}
    for level in culprits:
        if breaker is not None and level == breaker:
            continue
        # an innocent lane: its flaky test failed on its first run and on every rerun there
        assert all((level, again) in flake_runs for again in range(FLAKE_RERUNS + 1))
