"""What a stack's judgement says of each lane of its chain (integrate/judgement.py: pure, moved
out of passes/observe.py by issue 46)."""

from __future__ import annotations

from imm_action.git.candidate import Candidate
from imm_action.integrate.facts import CandidateFacts, ChecksFound
from imm_action.integrate.judgement import culprit_facts, held_tasks, verifiable, with_judgement
from imm_action.integrate.stack import StackFailed, StackLevel, StackPassed
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.model.state import ChildState, Lane, LocalRunner
from imm_action.verify.checks import Check
from tests.conftest import descriptor
from tests.unit.test_decide import batch, oid, pending


def _check(check_id: str, argv: list[str]) -> Check:
    return Check(check_id, parse_descriptor(descriptor(argv)))


def _result(check_id: str, passed: bool) -> CheckResult:
    return CheckResult(
        check_id=check_id, passed=passed, exit_code=0 if passed else 1, duration_ms=1,
        timed_out=False, output_limited=False, changed_outside=[], output_tail="",
    )  # fmt: skip


A_CHECK = _check("a:ok", ["-c", "print('a')"])
B_CHECK = _check("b:ok", ["-c", "print('b')"])


def _entry(task: str, checks: tuple[Check, ...]) -> CandidateFacts:
    build = Candidate(oid("candidate", task), oid("tree", task), oid("head"), oid("base"),
                      oid("lane", task))  # fmt: skip
    return CandidateFacts(
        task_id=task, lane_base=oid("base"), lane_commit=oid("lane", task), built_on=oid("head"),
        build=build, checks=ChecksFound(checks),
    )  # fmt: skip


def _levels() -> list[StackLevel]:
    return [
        StackLevel(oid("tree", "head"), ()),
        StackLevel(oid("tree", "a"), (A_CHECK,)),
        StackLevel(oid("tree", "b"), (A_CHECK, B_CHECK)),
    ]


def test_a_passed_stack_gives_every_lane_its_own_checks_results_from_the_top_tree() -> None:
    chain = [_entry("a", (A_CHECK,)), _entry("b", (B_CHECK,))]
    passed = StackPassed({A_CHECK.digest: _result("x", True), B_CHECK.digest: _result("y", True)})
    judged = with_judgement(chain, [0, 1], _levels(), passed)
    assert [[r.check_id for r in entry.results] for entry in judged] == [["a:ok"], ["b:ok"]]
    assert {entry.judged_on for entry in judged} == {oid("tree", "b")}


def test_a_failed_stack_judges_only_its_culprits_on_their_own_tree() -> None:
    chain = [_entry("a", (A_CHECK,)), _entry("b", (B_CHECK,))]
    failed = StackFailed({2: ((A_CHECK, _result("a:ok", False)),)})
    judged = with_judgement(chain, [0, 1], _levels(), failed)
    assert judged[0] == chain[0]  # not a culprit: no results
    assert judged[1].judged_on == oid("tree", "b")
    assert [r.check_id for r in judged[1].results] == ["a:ok"]
    assert judged[1].also_checks == (A_CHECK,)  # it broke a check not its own


def test_a_culprits_failure_under_a_shared_descriptor_carries_its_own_checks_id() -> None:
    mine = Check("b:same", A_CHECK.descriptor)
    entry = culprit_facts(_entry("b", (mine,)), (mine,), [(A_CHECK, _result("a:ok", False))], "t")
    assert [r.check_id for r in entry.results] == ["b:same"]
    assert entry.also_checks == ()


def test_held_tasks_are_the_integrated_ones_in_the_order_they_landed() -> None:
    first, second = oid("c1"), oid("c2")
    lanes = {task: Lane(branch=f"imm-lane/x/{task}", base_head=oid("base"), lane_commit=commit,
                        runner=LocalRunner(path="log", pid=None))
             for task, commit in (("a", second), ("b", first))}  # fmt: skip
    done = [
        pending(task).model_copy(
            update={"state": ChildState.INTEGRATED, "commit": lane.lane_commit, "lane": lane}
        )
        for task, lane in lanes.items()
    ]
    state = batch(*done, pending("c"), commits=(first, second))
    assert held_tasks(state) == ["b", "a"]


def test_a_candidate_without_checks_found_is_not_verifiable() -> None:
    assert verifiable(_entry("a", (A_CHECK,)))
    missing = CandidateFacts(
        task_id="a", lane_base=oid("base"), lane_commit=oid("lane", "a"), built_on=oid("head"),
        build=_entry("a", ()).build, checks=None,
    )  # fmt: skip
    assert not verifiable(missing)
