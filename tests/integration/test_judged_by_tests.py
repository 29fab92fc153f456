"""Judged by tests (issue 58, SPEC §5.4): no lane weakens the suite — a lane whose change the
suite fails does not land by deleting, skipping or deselecting the failing test, nor by
rewriting the script the branch check runs; a task that retires a test says so, and the
report lists it; a check that reported tests and reports none fails. Real git, real pytest
runs in the sandbox, the GitHub-shaped passes and `imm run`."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from imm_action.render import github_batch_markdown
from tests.batch_helpers import current, make_project, run_pass, work
from tests.conftest import PYTEST_CHECK, descriptor, git, run_cli

VALUE = "def value():\n    return 1\n"
BROKEN = "def value():\n    return 2\n"
TESTS = (
    "from pkg.value import value\n\n\n"
    "def test_good():\n    assert value() == 1\n\n\n"
    "def test_other():\n    assert True\n"
)
WITHOUT_GOOD = "def test_other():\n    assert True\n"
SKIP_ALL = (
    "import pytest\n\n\n"
    "def pytest_collection_modifyitems(items):\n"
    "    for item in items:\n"
    "        item.add_marker(pytest.mark.skip(reason='later'))\n"
)
SUITE_LINE = shlex.join(["python3", *PYTEST_CHECK, "tests"])
SCRIPT = f"#!/bin/sh\nexec {SUITE_LINE}\n"

# What an agent does when the suite resists it (issue 58 #2): each variant breaks `value` and,
# within its task's scope, makes the suite say nothing of it.
VARIANTS: Mapping[str, Mapping[str, str | None]] = {
    "the break alone": {},
    "the suite's script rewritten": {"scripts/test.sh": "#!/bin/sh\nexit 0\n"},
    "the failing test deleted": {"tests/test_value.py": WITHOUT_GOOD},
    "every test skipped": {"tests/conftest.py": SKIP_ALL},
    "the failing test deselected": {
        "pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-k 'not good'\"\n"
    },
}


def _project(root: Path, suite: str, held: str, *, honest: bool = True) -> Path:
    """A package whose suite passes, a task `brk` whose scope holds the code, the tests, the
    suite's script and the project's config, and an honest task `ok`."""
    config = f"branch_checks:\n  - {json.dumps(suite)}\nheld_checks: {held}\n"
    return make_project(
        root, {"brk": [], **({"ok": []} if honest else {})},
        scopes={"brk": ["pkg/**", "tests/**", "scripts/**", "pyproject.toml"], "ok": ["ok.txt"]},
        checks={"brk": descriptor(["-c", "import pkg.value"])},
        extra_files={"pkg/__init__.py": "", "pkg/value.py": VALUE, "tests/test_value.py": TESTS,
                     "scripts/test.sh": SCRIPT, ".github/imm.yml": config},
    )  # fmt: skip


def _settle(repo: Path) -> dict[str, tuple[str, str]]:
    for _ in range(4):
        run_pass(repo)
        if current(repo).state.batch_state != "running":
            break
    return {c.task_id: (str(c.state), c.reason or "") for c in current(repo).state.children}


@pytest.mark.parametrize("held", ["all", "branch"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_lane_that_breaks_the_suite_never_lands_however_it_silences_it(
    tmp_path: Path, variant: str, held: str
) -> None:
    """The lane alone: what it silences, the suite's run on its candidate says (the honest
    lane beside it: `imm run` below)."""
    suite = "sh scripts/test.sh" if variant == "the suite's script rewritten" else SUITE_LINE
    repo = _project(tmp_path / "r", suite, held, honest=False)
    run_pass(repo)  # the base passes the suite: its tests are what every move must pass
    work(repo, "brk", {"pkg/value.py": BROKEN, **VARIANTS[variant]})
    states = _settle(repo)
    assert states["brk"][0] == "needs_human", states
    reason = states["brk"][1]
    if variant == "the suite's script rewritten":
        assert reason == "lane_touches_plan: scripts/test.sh", reason
    elif variant in ("the failing test deleted", "the failing test deselected"):
        assert "1 test no longer passes: tests/test_value.py::test_good (missing)" in reason
    elif variant == "every test skipped":
        assert "2 tests no longer pass: tests/test_value.py::test_good (skipped)" in reason
    # the branch holds main's code: main's suite passes on it
    assert git(repo, "show", "imm/init:pkg/value.py") == VALUE


def test_through_imm_run_the_deleter_is_parked_naming_the_test_and_how_to_retire_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path / "r", SUITE_LINE, "branch")
    code, said = imm_run(tmp_path, capsys, repo, {
        "brk": {"pkg/value.py": BROKEN, "tests/test_value.py": WITHOUT_GOOD},
        "ok": {"ok.txt": "ok\n"},
    })  # fmt: skip
    assert code == 1, said
    states = {c.task_id: str(c.state) for c in current(repo).state.children}
    assert states == {"brk": "needs_human", "ok": "integrated"}
    assert git(repo, "show", "imm/init:pkg/value.py") == VALUE
    assert "1 test no longer passes: tests/test_value.py::test_good (missing)" in said
    assert "under `retires_tests` in docs/plans/brk.intent.json" in said
    code, out, _ = run_cli(capsys, "status", "--repo", str(repo))
    assert "passed, but 1 test no longer passes: tests/test_value.py::test_good (missing)" in out


def test_a_test_a_task_retires_lands_with_it_and_every_report_lists_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The honest rename: `retires_tests` in the intent, and the report names it."""
    repo = _project(tmp_path / "r", SUITE_LINE, "branch")
    intent_file = repo / "docs/plans/brk.intent.json"
    data = json.loads(intent_file.read_text())
    data["retires_tests"] = ["tests/test_value.py::test_good"]
    intent_file.write_text(json.dumps(data, indent=2) + "\n")
    git(repo, "commit", "-qam", "brk retires test_good")
    renamed = WITHOUT_GOOD + "\n\ndef test_renamed():\n    from pkg.value import value\n" \
        "    assert value() == 1\n"  # fmt: skip
    writes = {"brk": {"tests/test_value.py": renamed}, "ok": {"ok.txt": "ok\n"}}
    code, said = imm_run(tmp_path, capsys, repo, writes)
    assert code == 0, said
    assert "brk retired tests/test_value.py::test_good" in said
    stored = current(repo)
    assert stored.report is not None
    assert stored.report.retired == ["brk retired tests/test_value.py::test_good"]
    shown = github_batch_markdown(stored.report, stored.state, "https://github.com/o/r")
    assert "- `brk` retired `tests/test_value.py::test_good`" in shown


# a conftest that turns pytest's report off: the run exits 0 and reports nothing
NO_REPORT = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(tryfirst=True)\n"
    "def pytest_configure(config):\n"
    "    config.option.xmlpath = None\n"
)


def test_a_check_whose_test_report_vanishes_fails_the_move(tmp_path: Path) -> None:
    repo = _project(tmp_path / "r", SUITE_LINE, "branch", honest=False)
    run_pass(repo)
    work(repo, "brk", {"pkg/value.py": BROKEN, "tests/conftest.py": NO_REPORT,
                       "tests/test_value.py": WITHOUT_GOOD})  # fmt: skip
    states = _settle(repo)
    assert states["brk"][0] == "needs_human", states
    assert "branch:1: no test report, where 2 tests passed on the batch head" in states["brk"][1]


def imm_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    repo: Path,
    writes: Mapping[str, Mapping[str, str | None]],
) -> tuple[int, str]:
    spec = tmp_path / "writes.json"
    spec.write_text(json.dumps(writes))
    executor = shlex.join([sys.executable, str(Path(__file__).parents[1] / "writes_executor.py")])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_WRITES", str(spec))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    return code, out + err
