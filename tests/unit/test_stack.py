"""Stack verification and bisection (SPEC §5.4): which levels of a stack are culprits, and how
many probes it takes to find them. The checks here are a table: level -> passes or not. Level 0
is the batch head, judged by the checks of the tasks it holds; levels 1.. are the lanes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from hypothesis import given
from hypothesis import strategies as st

from imm_action.integrate.flakes import FLAKE_RERUNS
from imm_action.integrate.stack import (
    Probe,
    StackFailed,
    StackLevel,
    StackPassed,
    judge_stack,
    probe_levels,
)
from imm_action.integrate.stack_record import Culprit, StackRecord
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.ledger import TestLedger, TestOutcome
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check
from tests.conftest import descriptor


def _check(task: str) -> Check:
    return Check(f"{task}:ok", parse_descriptor(descriptor(["-c", task])))


def _result(check: Check, passed: bool) -> CheckResult:
    return CheckResult(
        check_id=check.check_id, passed=passed, exit_code=0 if passed else 1, duration_ms=1,
        timed_out=False, output_limited=False, changed_outside=[], output_tail="", error=None,
    )  # fmt: skip


class Table:
    """Lanes 1..size on a head (level 0). A check owned by lane `owner` fails from level
    `breaks_at` on (never: None), and, like a lane's own test, on every level below its owner.
    `held` checks belong to tasks the head holds: held check `h` fails from level
    `held_breaks_at[h]` on (0: on the head itself), and on the head's second run only where
    `flaky_on_head` does not name it."""

    def __init__(
        self,
        size: int,
        breaks_at: Mapping[int, int | None],
        *,
        held: int = 0,
        held_breaks_at: Mapping[int, int] | None = None,
        flaky_on_head: Sequence[int] = (),
    ) -> None:
        self.checks = [_check(f"t{level}") for level in range(size + 1)]  # [0]: unused
        self.held = [_check(f"held{index}") for index in range(held)]
        self.breaks_at = breaks_at
        self.held_breaks_at = held_breaks_at or {}
        self.flaky_on_head = flaky_on_head
        self.asked: list[Probe] = []

    def levels(self) -> list[StackLevel]:
        # the head is judged by the held checks; every lane by those, its own and the lanes'
        # below it
        head = StackLevel("tree0", tuple(self.held))
        lanes = [
            StackLevel(f"tree{level}", (*self.held, *self.checks[1 : level + 1]))
            for level in range(1, len(self.checks))
        ]
        return [head, *lanes]

    def passes(self, probe: Probe) -> bool:
        level, digest = probe.level, probe.check.digest
        for index, check in enumerate(self.held):
            if check.digest == digest:
                breaks = self.held_breaks_at.get(index)
                if probe.level == 0 and probe.again == 2 and index in self.flaky_on_head:
                    return True
                return breaks is None or level < breaks
        owner = next(i for i, check in enumerate(self.checks) if check.digest == digest)
        breaks = self.breaks_at.get(owner)
        return level >= owner and (breaks is None or level < breaks)

    def ask(self, probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult]:
        self.asked += probes
        return {
            (probe.level, probe.check.digest): _result(probe.check, self.passes(probe))
            for probe in probes
        }


def test_a_stack_whose_top_passes_runs_each_check_once_on_the_top() -> None:
    table = Table(24, {})
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackPassed)
    assert len(table.asked) == 24
    assert {probe.level for probe in table.asked} == {24}


def test_a_lane_breaking_an_earlier_lanes_check_is_the_culprit() -> None:
    table = Table(24, {3: 17})  # level 17 breaks level 3's check
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [17]
    ((check, result),) = judged.culprits[17]
    assert (check.check_id, result.passed) == ("t3:ok", False)


def test_the_caller_is_told_the_suspects_before_their_trial_to_verify_the_stack_without_them() -> (
    None
):
    table = Table(24, {3: 17})
    told: list[tuple[frozenset[int], int]] = []
    judged = judge_stack(
        table.levels(), table.ask, suspected=lambda levels: told.append((levels, len(table.asked)))
    )
    assert isinstance(judged, StackFailed)
    assert [levels for levels, _ in told] == [frozenset({17})]
    # told before any of level 17's reruns, so the stack without it runs beside them
    (_, asked_before) = told[0]
    assert not any(probe.level == 17 and probe.again for probe in table.asked[:asked_before])
    assert any(probe.level == 17 and probe.again for probe in table.asked[asked_before:])


def test_a_culprit_at_the_top_is_told_of_to_nobody() -> None:
    # the stack without the top lane is the stack below it: known already
    told: list[frozenset[int]] = []
    table = Table(24, {3: 24})
    judged = judge_stack(table.levels(), table.ask, suspected=told.append)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [24]
    assert told == []


def test_a_lane_whose_own_check_fails_on_the_stack_is_the_culprit() -> None:
    table = Table(24, {9: 9})
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [9]


def test_a_check_is_never_blamed_on_a_level_below_its_owner() -> None:
    # the owner's own test is absent below it: failing there is nobody's fault
    table = Table(8, {5: 5})
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [5]
    assert all(probe.level >= 5 for probe in table.asked if probe.check.check_id == "t5:ok")


def test_a_lane_breaking_a_check_the_head_already_holds_is_the_culprit() -> None:
    # the head holds a task whose check lane 6 breaks: its base held that task, and it is
    # judged by that task's check all the same (issue 28 #1)
    table = Table(8, {}, held=3, held_breaks_at={1: 6})
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [6]
    ((check, _),) = judged.culprits[6]
    assert check.check_id == "held1:ok"
    assert judged.on_head == ()
    # the head was asked once, for its recorded verdict (issue 61: the green-base check or the
    # last move ran it there), before the lanes
    assert [(p.level, p.again) for p in table.asked if p.level == 0] == [(0, 0)]


def test_a_held_check_failing_on_the_head_on_every_run_is_the_heads_not_a_lanes() -> None:
    table = Table(8, {}, held=2, held_breaks_at={0: 0})
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert judged.culprits == {}
    assert [check.check_id for check, _ in judged.on_head] == ["held0:ok"]
    # once more on the top, then on the head itself and on every rerun there
    head_runs = [(p.level, p.again) for p in table.asked if p.level == 0]
    assert head_runs == [(0, 0), *((0, n) for n in range(1, FLAKE_RERUNS + 1))]


def test_a_held_check_that_flips_on_the_head_is_blamed_on_no_lane_failing_on_its_parent() -> None:
    # flaky on the head (its second rerun there passes): known to flip, it is not blamed on a
    # lane while it fails on that lane's parent too, so nobody's lane is blamed
    table = Table(8, {}, held=1, held_breaks_at={0: 0}, flaky_on_head=[0])
    judged = judge_stack(table.levels(), table.ask)
    assert isinstance(judged, StackFailed)
    assert judged.culprits == {}
    assert [check.check_id for check, _ in judged.on_head] == ["held0:ok"]
    assert "held0:ok" in judged.flaky


def test_two_failing_checks_are_bisected_side_by_side() -> None:
    table = Table(24, {2: 11, 20: 20})
    judged = judge_stack(table.levels(), table.ask, workers=2)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [11, 20]
    assert len(_first_runs(table)) <= 24 + 2 * math.ceil(math.log2(24))


def test_several_workers_probe_several_levels_at_once() -> None:
    alone, together = Table(64, {1: 40}), Table(64, {1: 40})
    judge_stack(alone.levels(), alone.ask, workers=1)
    judge_stack(together.levels(), together.ask, workers=4)
    rounds_alone = len(_first_runs(alone)) - 64
    assert rounds_alone == math.ceil(math.log2(63))
    # four probes a round cut the range in five: fewer rounds, more probes
    assert len(_first_runs(together)) - 64 > rounds_alone


def _first_runs(table: Table) -> list[Probe]:
    """The probes that are no rerun (a failure's confirmation, integrate/flakes.py)."""
    return [probe for probe in table.asked if not probe.again]


def test_a_stack_is_not_judged_while_a_result_it_needs_is_unknown() -> None:
    table = Table(4, {1: 3})
    assert judge_stack(table.levels(), lambda probes: None) is None


def test_a_head_alone_is_a_stack_that_passes_without_a_probe() -> None:
    table = Table(0, {}, held=2)
    assert isinstance(judge_stack(table.levels(), table.ask), StackPassed)
    assert table.asked == []


def test_probe_levels_split_the_open_range_evenly() -> None:
    assert probe_levels(0, 8, 1) == [4]
    assert probe_levels(0, 8, 3) == [2, 4, 6]
    assert probe_levels(5, 6, 4) == [5]


@given(
    size=st.integers(min_value=1, max_value=40),
    breaks=st.dictionaries(
        st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=40), max_size=4
    ),
    workers=st.integers(min_value=1, max_value=6),
)
def test_bisection_finds_exactly_the_first_failing_level_of_each_check(
    size: int, breaks: dict[int, int], workers: int
) -> None:
    # a check breaks at or above its owner's level, inside the stack
    breaks_at: dict[int, int | None] = {
        owner: max(owner, level)
        for owner, level in breaks.items()
        if owner <= size and level <= size
    }
    table = Table(size, breaks_at)
    judged = judge_stack(table.levels(), table.ask, workers)
    expected = sorted({level for level in breaks_at.values() if level is not None})
    if not expected:
        assert isinstance(judged, StackPassed)
        assert len(table.asked) == size
        return
    assert isinstance(judged, StackFailed)
    assert sorted(judged.culprits) == expected
    failing = len(breaks_at)
    first_runs = _first_runs(table)
    # each failing check: at most ⌈log2 size⌉ rounds of at most `workers` probes
    assert len(first_runs) <= size + failing * max(1, workers) * max(1, math.ceil(math.log2(size)))
    # no (level, check) is asked twice, nor a rerun of one
    asked = {(p.level, p.check.digest, p.again) for p in table.asked}
    assert len(asked) == len(table.asked)
    # a failure that never flips: once more on the top, on every rerun of its culprit, once
    # on the culprit's parent (where it has one), and no more
    reruns = [p for p in table.asked if p.again]
    assert len(reruns) <= failing * (1 + FLAKE_RERUNS + 1)


def test_a_stack_record_names_its_lanes_its_runs_and_what_bisection_found() -> None:
    clean = StackRecord(("a", "b"), 2)
    assert (
        clean.line()
        == "verified 2 lanes as one stack (a, b): 2 check runs, every check passed on its top"
    )
    found = StackRecord(("a", "b", "c"), 5, (Culprit("b", ("a:ok",), "f" * 40),))
    assert found.line() == (
        "verified 3 lanes as one stack (a, b, c): 5 check runs; "
        "bisection found b (a:ok first failed on ffffffffffff)"
    )


# -- judged by the head's tests (issue 58) --------------------------------------------------------
def _suite_levels(
    retired_at: int | None = None, asked: list[Probe] | None = None
) -> tuple[list[StackLevel], Callable[[Sequence[Probe]], dict[tuple[int, str], CheckResult]]]:
    """A head whose suite passed t::a and t::b, and three lanes; from level 2 on t::b is gone
    (deleted, deselected): every run still exits 0."""
    suite = _check("suite")
    head = TestLedger(source="junit", tests={"t::a": "passed", "t::b": "passed"})

    def retired(level: int) -> frozenset[str]:
        return (
            frozenset({"t::b"}) if retired_at is not None and level >= retired_at else frozenset()
        )

    levels = [StackLevel("tree0", (suite,), baseline={suite.digest: head})] + [
        StackLevel(f"tree{level}", (suite,), retired=retired(level)) for level in (1, 2, 3)
    ]

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult]:
        found = {}
        for probe in probes:
            (asked if asked is not None else []).append(probe)
            tests: dict[str, TestOutcome] = {"t::a": "passed"}
            if probe.level < 2:
                tests["t::b"] = "passed"
            ledger = TestLedger(source="junit", tests=tests)
            found[(probe.level, probe.check.digest)] = _result(probe.check, True).model_copy(
                update={"tests": ledger}
            )
        return found

    return levels, ask


def test_a_lane_dropping_a_test_the_head_passed_is_the_culprit_though_every_run_exits_0() -> None:
    asked: list[Probe] = []
    levels, ask = _suite_levels(asked=asked)
    judged = judge_stack(levels, ask)
    # the head is what the tests were lost against: it is not run again to be sure
    assert all(probe.level > 0 for probe in asked)
    assert isinstance(judged, StackFailed)
    assert list(judged.culprits) == [2]
    ((_, result),) = judged.culprits[2]
    assert (result.passed, result.lost_tests) == (False, ["t::b (missing)"])


def test_a_test_a_lane_of_the_stack_retires_is_owed_by_no_level_above_it() -> None:
    levels, ask = _suite_levels(retired_at=2)
    assert isinstance(judge_stack(levels, ask), StackPassed)
