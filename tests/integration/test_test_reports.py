"""Where a check's test ledger comes from (issue 58), through the real sandbox: pytest's report
asked for through its environment, a report written to $IMM_TEST_REPORT, the file a descriptor
names, TAP in the output — and a report a check makes a link to a host file is not read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.sandbox.choice import choose_confinement
from imm_action.sandbox.confine import NOT_CONFINED
from imm_action.verify.check_setup import CheckPlace
from imm_action.verify.checks import Check, TreeRerun, Verifier
from imm_action.verify.result_cache import ResultCache
from tests.conftest import PYTEST_CHECK, git, make_repo

TESTS = "def test_one():\n    pass\n\n\ndef test_two():\n    assert False\n"
TWO = "tests/test_m.py::test_two"
ADDS = {"fullName": "sum adds", "status": "passed"}
JEST = {"testResults": [{"name": "{root}/sum.test.js", "assertionResults": [ADDS]}]}


@pytest.fixture(params=["unconfined", "sandboxed"])
def place(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def tree(tmp_path: Path) -> tuple[GitRepo, str]:
    script = f"exec python3 {' '.join(PYTEST_CHECK)} tests\n"
    repo = make_repo(tmp_path / "r", {"tests/test_m.py": TESTS, "scripts/run.sh": script})
    return GitRepo(repo), git(repo, "rev-parse", "HEAD^{tree}").strip()


def _run(
    tree: tuple[GitRepo, str], place: str, executable: str, argv: list[str], **more: object
) -> CheckResult:
    """The check's result in a checkout of its own (unconfined), or in the sandbox, on an
    overlay of the tree where overlays work (the check's files only inside)."""
    verifier, oid = _verifier(tree, place)
    return verifier.verify(oid, [_check(executable, argv, **more)])[0]


def _check(executable: str, argv: list[str], **more: object) -> Check:
    body = {"contract": "assurance_kernel/verification_descriptor/v2",
            "command": {"executable": executable, "argv": argv}, **more}  # fmt: skip
    return Check("t:ok", parse_descriptor(json.dumps(body)))


def _verifier(tree: tuple[GitRepo, str], place: str) -> tuple[Verifier, str]:
    repo, oid = tree
    confinement = NOT_CONFINED
    if place == "sandboxed":
        confinement = choose_confinement(
            "auto", holds_credential=False, git_folders=[repo.common_directory()]
        )
        assert confinement.active, confinement.why
    where = CheckPlace(confinement, os.environ["PATH"])
    return Verifier(repo, ResultCache(), path_env=os.environ["PATH"], place=where), oid


def test_pytest_reports_its_tests_without_the_user_asking_even_from_a_script(
    tree: tuple[GitRepo, str], place: str
) -> None:
    for executable, argv in (("python3", [*PYTEST_CHECK, "tests"]), ("sh", ["scripts/run.sh"])):
        result = _run(tree, place, executable, argv)
        assert result.tests is not None, result
        assert result.tests.tests == {"tests/test_m.py::test_one": "passed",
                                      "tests/test_m.py::test_two": "failed"}  # fmt: skip
        assert result.failed_tests == ["tests/test_m.py::test_two"]


def test_a_check_may_write_its_report_where_imm_test_report_says(
    tree: tuple[GitRepo, str], place: str
) -> None:
    tap = "TAP version 13\\nok 1 - adds\\nnot ok 2 - subtracts\\n1..2\\n"
    code = f"import os; open(os.environ['IMM_TEST_REPORT'], 'w').write('{tap}')"
    result = _run(tree, place, "python3", ["-c", code])
    assert result.tests is not None
    assert result.tests.tests == {"adds": "passed", "subtracts": "failed"}


def test_a_descriptor_names_the_file_its_runner_writes_and_tap_in_the_output_counts(
    tree: tuple[GitRepo, str], place: str
) -> None:
    report = json.dumps(JEST).replace("{root}", "' + os.getcwd() + '")
    code = ("import os, pathlib; pathlib.Path('out').mkdir(); "
            f"pathlib.Path('out/jest.json').write_text('{report}'); "
            "print('TAP version 13'); print('ok 1 - printed'); print('1..1')")  # fmt: skip
    result = _run(tree, place, "python3", ["-c", code], report="out/jest.json")
    assert result.tests is not None
    assert result.tests.tests == {"sum.test.js > sum adds": "passed", "printed": "passed"}


def test_a_report_the_check_made_a_link_to_a_host_file_is_not_read(
    tree: tuple[GitRepo, str], place: str, tmp_path: Path
) -> None:
    secret = tmp_path / "host.xml"
    secret.write_text('<testsuite><testcase name="read-from-the-host"/></testsuite>')
    code = f"import os; os.symlink({str(secret)!r}, os.environ['IMM_TEST_REPORT'])"
    result = _run(tree, place, "python3", ["-c", code])
    assert result.tests is None


def _rerun_alone(
    tree: tuple[GitRepo, str], place: str, executable: str, argv: list[str], alone: set[str]
) -> CheckResult:
    """A rerun of the check of only the tests `alone` names (issue 61, ADR 0073)."""
    verifier, oid = _verifier(tree, place)
    check = _check(executable, argv)
    (result,) = verifier.verify_again_queued([TreeRerun(oid, check, -1, frozenset(alone))])
    return result


def test_a_rerun_of_failing_tests_runs_them_alone_under_pytest_even_from_a_script(
    tree: tuple[GitRepo, str], place: str
) -> None:
    for executable, argv in (("python3", [*PYTEST_CHECK, "tests"]), ("sh", ["scripts/run.sh"])):
        result = _rerun_alone(tree, place, executable, argv, {TWO})
        assert result.ran_only == [TWO]
        assert result.tests is not None
        assert result.tests.tests == {TWO: "failed"}
        assert not result.passed


def test_a_runner_that_cannot_run_tests_alone_runs_whole_and_says_so(
    tree: tuple[GitRepo, str], place: str
) -> None:
    tap = "TAP version 13\\nok 1 - adds\\nnot ok 2 - subtracts\\n1..2\\n"
    code = f"import os; open(os.environ['IMM_TEST_REPORT'], 'w').write('{tap}')"
    result = _rerun_alone(tree, place, "python3", ["-c", code], {"subtracts"})
    assert result.ran_only == []  # the whole check ran
    assert result.tests is not None
    assert result.tests.tests == {"adds": "passed", "subtracts": "failed"}


def test_a_rerun_alone_of_a_test_pytest_does_not_know_runs_nothing_and_passes_nothing(
    tree: tuple[GitRepo, str], place: str
) -> None:
    gone = "tests/test_m.py::test_three"
    result = _rerun_alone(tree, place, "python3", [*PYTEST_CHECK, "tests"], {gone})
    assert result.ran_only == [gone]
    assert not result.passed  # pytest: no tests ran
    assert result.tests is None or gone not in result.tests.tests


def test_a_rerun_alone_does_not_collect_the_files_that_hold_none_of_its_tests(
    tmp_path: Path, place: str
) -> None:
    # a file that cannot even be imported now: collecting it would stop the run
    files = {"tests/test_m.py": TESTS, "tests/test_other.py": "raise ImportError('collected')\n"}
    repo = make_repo(tmp_path / "r", files)
    tree = (GitRepo(repo), git(repo, "rev-parse", "HEAD^{tree}").strip())
    result = _rerun_alone(tree, place, "python3", [*PYTEST_CHECK, "tests"], {TWO})
    assert result.tests is not None
    assert result.tests.tests == {TWO: "failed"}
