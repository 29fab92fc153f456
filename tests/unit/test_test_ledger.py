"""The test ledger (issue 58): reports read into per-test outcomes, bounded, from JUnit XML,
TAP and jest's/vitest's JSON — and what a candidate's ledger lost against the head's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.integrate.ledger import judged_against, lost_tests, retired_covers
from imm_action.ledger.bounds import MAX_REPORT_BYTES, bounded_ledger
from imm_action.ledger.read import read_report, report_bytes, run_ledger
from imm_action.model.ledger import (
    MAX_NAMED_TESTS,
    MAX_TEST_ID,
    MAX_TESTS,
    TestLedger,
    TestOutcome,
    lost_line,
)
from imm_action.model.outcome import CheckResult

# -- JUnit XML -------------------------------------------------------------------------------------
_CASE = '<testcase classname="tests.test_c" name="{}" file="tests/test_c.py">{}</testcase>'
PYTEST_XUNIT1 = "".join(
    [
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite>',
        '<testcase classname="tests.test_c" name="test_good" file="tests/test_c.py" line="1"/>',
        '<testcase classname="tests.test_c.TestC" name="test_x[1-2]" file="tests/test_c.py"/>',
        _CASE.format("test_bad", '<failure message="assert 0">assert 0</failure>'),
        _CASE.format("test_skip", '<skipped type="pytest.skip" message="no"/>'),
        _CASE.format("test_xf", '<skipped type="pytest.xfail" message="known"/>'),
        _CASE.format("test_err", '<error message="fixture">boom</error>'),
        "</testsuite></testsuites>",
    ]
).encode()


def test_pytests_report_keys_each_test_by_its_node_id_with_how_it_ended() -> None:
    ledger = read_report(PYTEST_XUNIT1)
    assert ledger is not None
    assert ledger.source == "junit"
    assert ledger.tests == {
        "tests/test_c.py::test_good": "passed",
        "tests/test_c.py::TestC::test_x[1-2]": "passed",
        "tests/test_c.py::test_bad": "failed",
        "tests/test_c.py::test_skip": "skipped",
        "tests/test_c.py::test_xf": "xfailed",
        "tests/test_c.py::test_err": "error",
    }
    assert ledger.failing() == ["tests/test_c.py::test_bad", "tests/test_c.py::test_err"]


def test_a_report_without_files_keys_tests_as_unittest_names_them_and_suites_nest() -> None:
    report = b"""<testsuite name="all"><testsuite name="tests.test_c.TestC">
    <testcase classname="tests.test_c.TestC" name="test_x"/></testsuite>
    <testcase name="bare"/></testsuite>"""
    ledger = read_report(report)
    assert ledger is not None
    assert ledger.tests == {"tests.test_c.TestC.test_x": "passed", "bare": "passed"}


@pytest.mark.parametrize(
    "hostile",
    [
        # billion laughs: entities that expand to gigabytes
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        b'<testsuite><testcase name="&b;"/></testsuite>',
        # an external entity that would read a host file into a test's name
        b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<testsuite><testcase name="&x;"/></testsuite>',
        b"<html><testcase name='t'/></html>",  # not a report
        b"<testsuite><testcase",  # cut short
    ],
)
def test_a_hostile_or_broken_xml_report_is_no_report(hostile: bytes) -> None:
    assert read_report(hostile) is None


# -- TAP -------------------------------------------------------------------------------------------
TAPE = """TAP version 13
# adds
ok 1 should be equal
ok 2 should be equal
# subtracts
not ok 3 should be equal
  ---
    operator: equal
  ...
ok 4 skipped one # SKIP not yet
not ok 5 a known bug # TODO fix it

1..5
# tests 5
# pass  2
# fail  1
"""

NODE = """TAP version 13
# Subtest: outer
    # Subtest: inner
    ok 1 - inner
    1..1
ok 1 - outer
  ---
  duration_ms: 1.5
  ...
# Subtest: second
not ok 2 - second
1..2
# tests 2
"""


def test_tapes_assertions_are_keyed_by_the_test_that_makes_them() -> None:
    ledger = read_report(TAPE.encode())
    assert ledger is not None
    assert ledger.tests == {
        "adds > should be equal": "passed",
        "adds > should be equal #2": "passed",
        "subtracts > should be equal": "failed",
        "subtracts > skipped one": "skipped",
        "subtracts > a known bug": "xfailed",
    }


def test_nodes_test_runner_counts_its_top_level_tests() -> None:
    ledger = read_report(NODE.encode())
    assert ledger is not None
    assert ledger.tests == {"outer": "passed", "second": "failed"}


def test_tap_in_a_runs_output_joins_its_ledger_and_plain_output_is_none() -> None:
    assert run_ledger([], "collected 3 items\n3 passed in 0.01s\n") is None
    ledger = run_ledger([], f"npm notice\n{NODE}")
    assert ledger is not None
    assert set(ledger.tests) == {"outer", "second"}


# -- jest and vitest ------------------------------------------------------------------------------
def test_a_jest_report_keys_tests_by_their_file_in_the_tree_and_full_name() -> None:
    report = {"testResults": [{"name": "/work/tree/src/sum.test.js", "assertionResults": [
        {"fullName": "sum adds", "status": "passed"},
        {"ancestorTitles": ["sum"], "title": "subtracts", "status": "failed"},
        {"fullName": "sum later", "status": "pending"},
        {"fullName": "sum todo", "status": "todo"},
    ]}]}  # fmt: skip
    ledger = read_report(json.dumps(report).encode(), roots=["/work/tree"])
    assert ledger is not None
    assert ledger.source == "jest"
    assert ledger.tests == {
        "src/sum.test.js > sum adds": "passed",
        "src/sum.test.js > sum subtracts": "failed",
        "src/sum.test.js > sum later": "skipped",
        "src/sum.test.js > sum todo": "skipped",
    }


def test_json_that_is_not_a_jest_report_is_no_report() -> None:
    assert read_report(b'{"results": []}') is None
    assert read_report(b"{not json") is None


# -- one property for every format: what a runner reports is what the ledger holds ---------------
_NAMES = st.text(alphabet="abcdefghij_0123456789", min_size=1, max_size=12)
_OUTCOMES: list[TestOutcome] = ["passed", "failed", "error", "skipped", "xfailed"]


def _junit(tests: dict[str, TestOutcome]) -> bytes:
    children = {"failed": "<failure/>", "error": "<error/>", "skipped": "<skipped/>",
                "xfailed": '<skipped type="pytest.xfail"/>', "passed": ""}  # fmt: skip
    cases = "".join(
        f'<testcase classname="tests.test_m" name={quoteattr(name)} file="tests/test_m.py">'
        f"{children[outcome]}</testcase>"
        for name, outcome in tests.items()
    )
    return f"<testsuites><testsuite>{cases}</testsuite></testsuites>".encode()


def _tap(tests: dict[str, TestOutcome]) -> bytes:
    lines = {"passed": "ok {n} - {t}", "failed": "not ok {n} - {t}", "error": "not ok {n} - {t}",
             "skipped": "ok {n} - {t} # SKIP", "xfailed": "not ok {n} - {t} # TODO"}  # fmt: skip
    body = [lines[o].format(n=n, t=t) for n, (t, o) in enumerate(tests.items(), start=1)]
    return "\n".join(["TAP version 13", *body, f"1..{len(tests)}"]).encode()


def _jest(tests: dict[str, TestOutcome]) -> bytes:
    status = {"passed": "passed", "failed": "failed", "error": "failed", "skipped": "pending",
              "xfailed": "todo"}  # fmt: skip
    results = [{"fullName": t, "status": status[o]} for t, o in tests.items()]
    return json.dumps({"testResults": [{"name": "/t/a.test.js", "assertionResults": results}]}
                      ).encode()  # fmt: skip


@given(tests=st.dictionaries(_NAMES, st.sampled_from(_OUTCOMES), min_size=1, max_size=30))
def test_every_format_reads_back_the_outcomes_it_was_written_with(
    tests: dict[str, TestOutcome],
) -> None:
    junit = read_report(_junit(tests))
    assert junit is not None
    assert junit.tests == {f"tests/test_m.py::{t}": o for t, o in tests.items()}
    tap = read_report(_tap(tests))
    assert tap is not None
    lossy = {"error": "failed"}  # TAP and jest have no word for an error
    assert tap.tests == {t: lossy.get(o, o) for t, o in tests.items()}
    jest = read_report(_jest(tests), roots=["/t"])
    assert jest is not None
    assert jest.tests == {
        f"a.test.js > {t}": {"error": "failed", "xfailed": "skipped"}.get(o, o)
        for t, o in tests.items()
    }


# -- bounds ----------------------------------------------------------------------------------------
def test_past_its_bound_a_ledger_keeps_the_failing_tests_and_counts_what_it_cut() -> None:
    found = [(f"t{index:06d}", "passed") for index in range(MAX_TESTS + 5)]
    found.append(("zz_failing", "failed"))
    ledger = bounded_ledger("junit", found)  # type: ignore[arg-type]
    assert len(ledger.tests) == MAX_TESTS
    assert ledger.cut == 6
    assert ledger.tests["zz_failing"] == "failed"


def test_a_long_or_unprintable_test_id_is_cut_and_cleaned_and_two_stay_apart() -> None:
    long = "t" * (MAX_TEST_ID * 2)
    ledger = bounded_ledger("tap", [(long + "a", "passed"), (long + "b", "failed"),
                                    ("bell\x07\x1b[31m", "passed")])  # fmt: skip
    assert len(ledger.tests) == 3
    assert all(len(test) <= MAX_TEST_ID for test in ledger.tests)
    assert not any("\x07" in test or "\x1b" in test for test in ledger.tests)


def test_a_report_reached_through_a_link_or_past_its_size_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "secret.xml").write_bytes(PYTEST_XUNIT1)
    tree = tmp_path / "tree"
    (tree / "reports").mkdir(parents=True)
    (tree / "reports" / "ok.xml").write_bytes(PYTEST_XUNIT1)
    os.symlink(tmp_path / "host" / "secret.xml", tree / "reports" / "link.xml")
    os.symlink(tmp_path / "host", tree / "hop")
    (tree / "reports" / "big.xml").write_bytes(b" " * (MAX_REPORT_BYTES + 1))
    assert report_bytes(tree, "reports/ok.xml") == PYTEST_XUNIT1
    assert report_bytes(tree, "reports/link.xml") is None
    assert report_bytes(tree, "hop/secret.xml") is None
    assert report_bytes(tree, "reports/big.xml") is None
    assert report_bytes(tree, "reports/../reports/ok.xml") is None


# -- what a candidate lost against the head -----------------------------------------------------
HEAD = TestLedger(source="junit", tests={"a::good": "passed", "a::other": "passed",
                                         "a::flaky": "failed", "b::T::x": "passed"})  # fmt: skip


def _ledger(**tests: TestOutcome) -> TestLedger:
    return TestLedger(source="junit", tests={k.replace("__", "::"): v for k, v in tests.items()})


def test_a_test_that_passed_on_the_head_is_lost_when_missing_skipped_xfailed_or_failing() -> None:
    now = _ledger(a__good="skipped", a__other="xfailed", a__flaky="failed")
    assert lost_tests(HEAD, now) == ["a::good (skipped)", "a::other (xfailed)", "b::T::x (missing)"]
    assert lost_tests(HEAD, _ledger(a__good="passed", a__other="passed", b__T__x="passed")) == []


def test_a_test_failing_on_the_head_is_owed_nothing() -> None:
    now = _ledger(a__good="passed", a__other="passed", b__T__x="passed")
    assert lost_tests(HEAD, now) == []  # a::flaky failed there too: not this lane's loss


def test_a_retired_test_or_what_holds_it_is_not_lost() -> None:
    now = _ledger(a__other="passed")
    assert lost_tests(HEAD, now, retired=["a::good", "b::T"]) == []
    assert retired_covers(["b"], "b::T::x")
    assert retired_covers(["tests.test_c"], "tests.test_c.TestC.test_x")
    assert not retired_covers(["b::T::xy"], "b::T::x")
    assert not retired_covers(["a::goo"], "a::good")


def test_a_check_that_reported_tests_and_reports_none_loses_them_all() -> None:
    gone = lost_tests(HEAD, None)
    assert gone == ["no test report, where 3 tests passed on the batch head"]
    assert lost_tests(HEAD, _ledger()) == gone
    assert lost_line(gone) == gone[0]


def test_a_test_a_cut_ledger_left_out_is_not_called_missing() -> None:
    now = TestLedger(source="junit", tests={"a::good": "passed"}, cut=3)
    assert lost_tests(HEAD, now) == []


def _passing(ledger: TestLedger | None) -> CheckResult:
    return CheckResult(check_id="branch:1", passed=True, exit_code=0, duration_ms=1,
                       timed_out=False, output_limited=False, changed_outside=[],
                       output_tail="", tests=ledger)  # fmt: skip


def test_a_run_that_exited_0_and_lost_tests_fails_naming_them_and_a_whole_one_passes() -> None:
    judged = judged_against(_passing(_ledger(a__good="passed")), HEAD)
    assert not judged.passed
    assert judged.lost_tests == ["a::other (missing)", "b::T::x (missing)"]
    assert lost_line(judged.lost_tests) == (
        "2 tests no longer pass: a::other (missing), b::T::x (missing)"
    )
    whole = _passing(_ledger(a__good="passed", a__other="passed", b__T__x="passed"))
    assert judged_against(whole, HEAD) is whole
    assert judged_against(whole, None) is whole


def test_a_long_list_of_lost_tests_names_the_first_and_counts_the_rest() -> None:
    head = TestLedger(source="tap", tests={f"t{i:03d}": "passed" for i in range(50)})
    judged = judged_against(_passing(TestLedger(source="tap", tests={"t000": "passed"})), head)
    assert len(judged.lost_tests) == MAX_NAMED_TESTS + 1
    assert judged.lost_tests[-1] == f"… and {49 - MAX_NAMED_TESTS} more"
    assert lost_line(judged.lost_tests).startswith("49 tests no longer pass: t001 (missing)")


def test_failing_tests_outside_a_scope_are_named_only_when_every_one_lies_outside() -> None:
    """Issue 62 #3: a retry as it is cannot pass tests its lane may not change."""
    from imm_action.integrate.ledger import failing_outside_scope
    from imm_action.model.outcome import Failure

    def failing(*tests: str) -> Failure:
        return Failure(step="branch:1", command="pytest", exit_code=1, output_tail="",
                       failed_tests=list(tests))  # fmt: skip

    out = failing("tests/test_v.py::test_good", "tests/test_w.py::T::test_x")
    assert failing_outside_scope([out], ["pkg/**"]) == (
        "tests/test_v.py::test_good", "tests/test_w.py::T::test_x")  # fmt: skip
    assert failing_outside_scope([out], ["pkg/**", "tests/test_w.py"]) == ()  # one in scope
    assert failing_outside_scope([failing("test_good (tests.T)")], ["pkg/**"]) == ()  # no file
    assert failing_outside_scope([failing()], ["pkg/**"]) == ()  # no test named
