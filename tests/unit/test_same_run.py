"""One run per command and tree (issue 61): which descriptors are one run, and how one run's
result serves each of them."""

from __future__ import annotations

from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check
from imm_action.verify.same_run import by_run, leader, served, serves
from tests.conftest import descriptor

SUITE = ["-m", "pytest", "-q"]


def _check(check_id: str, argv: list[str], **command: object) -> Check:
    return Check(check_id, parse_descriptor(descriptor(argv, **command)))


def _result(check: Check, duration_ms: int) -> CheckResult:
    return CheckResult(
        check_id=check.check_id, passed=True, exit_code=0, duration_ms=duration_ms,
        timed_out=False, output_limited=False, changed_outside=[], output_tail="",
    )  # fmt: skip


def test_checks_differing_in_time_limit_or_declared_reads_are_one_run() -> None:
    branch = _check("branch:1", SUITE)
    task = _check("a:ok", SUITE, timeout_ms=60_000)
    read = Check("b:ok", parse_descriptor(descriptor(SUITE)[:-1] + ', "reads": ["src"]}'))
    assert list(by_run([branch, task, read]).values()) == [[branch, task, read]]


def test_another_command_cwd_or_output_limit_is_another_run() -> None:
    branch = _check("branch:1", SUITE)
    others = [
        _check("a:ok", [*SUITE, "-x"]),
        _check("b:ok", SUITE, cwd="src"),
        _check("c:ok", SUITE, max_output_bytes=1024),
    ]
    assert len(by_run([branch, *others])) == 4


def test_the_run_that_may_last_longest_serves_and_outlasting_a_limit_times_out() -> None:
    short, long = _check("a:ok", SUITE, timeout_ms=1_000), _check("branch:1", SUITE)
    assert leader([short, long]) is long
    assert serves(long, short)
    assert not serves(short, long)  # its run might have been cut short
    verdict = served(_result(long, duration_ms=5_000), long, short)
    assert (verdict.check_id, verdict.ran_as) == ("a:ok", "branch:1")
    assert verdict.timed_out
    assert not verdict.passed
    quick = served(_result(long, duration_ms=500), long, short)
    assert quick.passed
