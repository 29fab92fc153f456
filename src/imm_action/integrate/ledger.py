"""Pure: no lane weakens the suite (issue 58, SPEC §5.4). A check that reported its tests on the
verified head is judged on a candidate by its tests too: every test that passed on the head
must pass on the candidate — a test missing (deleted, deselected), skipped or xfailed fails the
move as a failing test does, unless a task of the stack retires it in its intent; and a check
that reported tests on the head and reports none fails."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from imm_action.model.ledger import REPORT_GONE, TestLedger, named_tests
from imm_action.model.outcome import CheckResult, Failure
from imm_action.plan.glob import scope_covers


def retired_covers(retired: Collection[str], test: str) -> bool:
    """Whether a retired entry names `test`: its id, or what holds it — a file or a class of a
    node id (`tests/test_old.py`, `tests/test_old.py::TestOld`), a dotted module or class."""
    if not retired:
        return False
    if test in retired:
        return True
    for separator in ("::", ".", " > "):
        at = test.rfind(separator)
        while at > 0:
            if test[:at] in retired:
                return True
            at = test.rfind(separator, 0, at)
    return False


def lost_tests(
    baseline: TestLedger, now: TestLedger | None, retired: Collection[str] = ()
) -> list[str]:
    """The tests that passed on the head and do not on this run, each with how
    (`tests/test_c.py::test_x (missing)`, `… (skipped)`), in id order; a test a task retires
    is not lost, nor one a cut ledger may have left out."""
    passed = [test for test, outcome in baseline.tests.items() if outcome == "passed"]
    if not passed:
        return []
    if now is None or not now.tests:
        return [REPORT_GONE.format(count=len(passed))]
    lost: list[str] = []
    for test in passed:
        outcome = now.tests.get(test)
        if outcome == "passed" or (outcome is None and now.cut):
            continue
        if retired_covers(retired, test):
            continue
        lost.append(f"{test} ({outcome or 'missing'})")
    return sorted(lost)


def judged_against(
    result: CheckResult, baseline: TestLedger | None, retired: Collection[str] = ()
) -> CheckResult:
    """`result` as the move is judged by it: failed, naming its lost tests, when a test that
    passed on the head (`baseline`) does not pass here."""
    if baseline is None:
        return result
    lost = lost_tests(baseline, result.tests, retired)
    if not lost:
        return result
    return result.model_copy(update={"passed": False, "lost_tests": named_tests(lost)})


def failing_outside_scope(failures: Sequence[Failure], scope: Sequence[str]) -> tuple[str, ...]:
    """The failing tests behind `failures` when every one of them lies in a file outside the
    task's `scope` (issue 62 #3): its lane may not change them, so a retry as it is cannot
    pass them. () when any of them lies in scope, or names no file (a retry may help)."""
    tests = [test for failure in failures for test in failure.failed_tests]
    files = [_test_file(test) for test in tests]
    if not tests or any(file is None or scope_covers(scope, file) for file in files):
        return ()
    return tuple(dict.fromkeys(tests))


def _test_file(test: str) -> str | None:
    """The file a test id names: a node id's (`tests/test_x.py::test_y`), or an id that is a
    path; None where the id names none (a dotted name, a TAP description)."""
    file = test.split("::", 1)[0]
    return file if "/" in file or file.endswith(".py") else None
