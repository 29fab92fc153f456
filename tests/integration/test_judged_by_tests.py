"""Judged by tests (issue 58, SPEC §5.4): no lane weakens the suite — a lane whose change the
suite fails does not land by deleting, skipping or deselecting the failing test, nor by
rewriting the script the branch check runs; a task that retires a test says so, and the
report lists it; a check that reported tests and reports none fails. Real git, real pytest
runs in the sandbox, the GitHub-shaped passes and `imm run`."""

from __future__ import annotations

import json
import shlex
import subprocess
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


def _project(root: Path, suite: str, held: str, **kw: object) -> Path:
    """A package whose suite passes, a task `brk` whose scope holds the code, the tests, the
    suite's script and the project's config, and an honest task `ok`."""
    config = f"branch_checks:\n  - {json.dumps(suite)}\nheld_checks: {held}\n"
    return make_project(
        root, {"brk": [], "ok": []},
        scopes={"brk": ["pkg/**", "tests/**", "scripts/**", "pyproject.toml"], "ok": ["ok.txt"]},
        checks={"brk": descriptor(["-c", "import pkg.value"])},
        extra_files={"pkg/__init__.py": "", "pkg/value.py": VALUE, "tests/test_value.py": TESTS,
                     "scripts/test.sh": SCRIPT, ".github/imm.yml": config},
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _settle(repo: Path) -> dict[str, tuple[str, str]]:
    for _ in range(4):
        run_pass(repo)
        if current(repo).state.batch_state != "running":
            break
    return {c.task_id: (str(c.state), c.reason or "") for c in current(repo).state.children}


def _mains_suite_passes_on(repo: Path, tmp_path: Path) -> bool:
    """The branch's code under main's own tests and runner configuration."""
    tree = tmp_path / "final"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "imm/init")
    (tree / "tests" / "test_value.py").write_text(TESTS)
    for planted in ("tests/conftest.py", "pyproject.toml"):
        (tree / planted).unlink(missing_ok=True)
    done = subprocess.run([sys.executable, *PYTEST_CHECK, "tests"], cwd=tree, check=False,
                          capture_output=True)  # fmt: skip
    return done.returncode == 0


@pytest.mark.parametrize("held", ["all", "branch"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_lane_that_breaks_the_suite_never_lands_however_it_silences_it(
    tmp_path: Path, variant: str, held: str
) -> None:
    suite = "sh scripts/test.sh" if variant == "the suite's script rewritten" else SUITE_LINE
    repo = _project(tmp_path / "r", suite, held)
    run_pass(repo)  # the base passes the suite: its tests are what every move must pass
    work(repo, "brk", {"pkg/value.py": BROKEN, **VARIANTS[variant]})
    work(repo, "ok")
    states = _settle(repo)
    assert states["ok"][0] == "integrated", states
    assert states["brk"][0] == "needs_human", states
    reason = states["brk"][1]
    if variant == "the suite's script rewritten":
        assert reason == "lane_touches_plan: scripts/test.sh", reason
    elif variant in ("the failing test deleted", "the failing test deselected"):
        assert "1 test no longer passes: tests/test_value.py::test_good (missing)" in reason
    elif variant == "every test skipped":
        assert "2 tests no longer pass: tests/test_value.py::test_good (skipped)" in reason
    assert _mains_suite_passes_on(repo, tmp_path)


def test_through_imm_run_the_deleter_is_parked_naming_the_test_and_how_to_retire_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path / "r", SUITE_LINE, "branch")
    code, said = _imm_run(tmp_path, capsys, repo, {
        "brk": {"pkg/value.py": BROKEN, "tests/test_value.py": WITHOUT_GOOD},
        "ok": {"ok.txt": "ok\n"},
    })  # fmt: skip
    assert code == 1, said
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
    code, said = _imm_run(tmp_path, capsys, repo, writes)
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
    repo = _project(tmp_path / "r", SUITE_LINE, "branch")
    run_pass(repo)
    work(repo, "brk", {"pkg/value.py": BROKEN, "tests/conftest.py": NO_REPORT,
                       "tests/test_value.py": WITHOUT_GOOD})  # fmt: skip
    states = _settle(repo)
    assert states["brk"][0] == "needs_human", states
    assert "branch:1: no test report, where 2 tests passed on the batch head" in states["brk"][1]


def _imm_run(
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


# -- ownership follows the plan's order (issue 58 #1) ----------------------------------------------
def _unittest(*argv: str) -> str:
    return descriptor(["-m", "unittest", *argv])


def _module_test(name: str) -> dict[str, str | None]:
    return {
        f"pkg/contrib/{name}.py": f"def {name}():\n    return '{name}'\n",
        f"pkg/contrib/test_{name}.py": (
            f"import unittest\n\nfrom pkg.contrib.{name} import {name}\n\n\n"
            f"class Test(unittest.TestCase):\n    def test_{name}(self):\n"
            f"        self.assertEqual({name}(), '{name}')\n"
        ),
    }


def test_an_honest_plan_whose_upstream_task_builds_what_a_later_check_tests_lands_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`up` changes the package `all`'s check runs (its exports); three tasks add modules and
    their tests to it; `late`, after `all`, adds its own. Each may: the tasks before a check's
    own change what it names, and a new file below a named folder is not a change to it.
    `bad`, after `all`, rewrites a test that landed below the folder: refused."""
    modules = [f"m{index}" for index in (1, 2, 3)]
    tasks = {"up": [], **{m: ["up"] for m in modules}, "all": modules, "late": ["all"],
             "bad": ["all"]}  # fmt: skip
    scopes = {
        "up": ["pkg/contrib/__init__.py"],
        **{m: [f"pkg/contrib/{m}.py", f"pkg/contrib/test_{m}.py"] for m in modules},
        "all": ["docs/contrib.md"],
        "late": ["pkg/contrib/late.py", "pkg/contrib/test_late.py"],
        "bad": ["pkg/contrib/**"],
    }
    checks = {
        "up": descriptor(["-c", "import pkg.contrib"]),
        **{m: _unittest(f"pkg.contrib.test_{m}") for m in modules},
        "all": _unittest("discover", "-s", "pkg/contrib", "-t", "."),
        "late": _unittest("pkg.contrib.test_late"),
        "bad": descriptor(["-c", "pass"]),
    }
    repo = make_project(tmp_path / "r", tasks, scopes=scopes, checks=checks,
                        extra_files={"pkg/__init__.py": "", "pkg/contrib/__init__.py": "",
                                     ".github/imm.yml": "max_parallel: 3\n"})  # fmt: skip
    writes = {
        "up": {"pkg/contrib/__init__.py": "EXPORTS = []\n"},
        **{m: _module_test(m) for m in modules},
        "all": {"docs/contrib.md": "contrib\n"},
        "late": _module_test("late"),
        "bad": {"pkg/contrib/test_m1.py": "def test_nothing():\n    pass\n"},
    }
    code, said = _imm_run(tmp_path, capsys, repo, writes)
    assert code == 1, said
    states = {c.task_id: (str(c.state), c.reason) for c in current(repo).state.children}
    assert states.pop("bad") == (
        "needs_human",
        "lane_touches_check: pkg/contrib/test_m1.py (all, m1)",
    )
    assert {state for state, _ in states.values()} == {"integrated"}, states
    assert (
        git(repo, "show", "imm/init:pkg/contrib/test_m1.py")
        == writes["m1"]["pkg/contrib/test_m1.py"]
    )


def test_a_task_whose_scope_covers_a_later_check_runs_first_and_a_parked_one_holds_none_back(
    tmp_path: Path,
) -> None:
    """Issue 58 #4: s's scope covers the test c's check names, and nothing orders them: the
    plan runs s first (its lane may write that test), c once s ended — landed or parked."""
    test_c = "def test_c():\n    assert open('c.txt').read() == 'c\\n'\n"
    s_check = descriptor(["-c", "import pathlib; assert pathlib.Path('s.txt').exists()"])
    for s_lands in (True, False):
        repo = make_project(
            tmp_path / f"r{s_lands}", {"c": [], "s": []},
            checks={"c": descriptor(["-m", "pytest", "tests/test_c.py"]), "s": s_check},
            scopes={"c": ["c.txt", "tests/test_c.py"], "s": ["s.txt", "tests/**"]},
        )  # fmt: skip
        assert run_pass(repo).admitted == ("s",)  # c waits for s: not bound to be refused
        work(repo, "s", {"tests/test_c.py": test_c, **({"s.txt": "s\n"} if s_lands else {})})
        passed = run_pass(repo)
        assert passed.integrated == (("s",) if s_lands else ())
        assert passed.admitted == ("c",)
        work(repo, "c", {"c.txt": "c\n", **({} if s_lands else {"tests/test_c.py": test_c})})
        assert run_pass(repo).integrated == ("c",)


# -- tests named as their users name them (issue 58 #3) -------------------------------------------
C_PY = "def c():\n    return 'c'\n"
TEST_C = "import unittest\n\nfrom c import c\n\n\nclass T(unittest.TestCase):\n" \
    "    def test_c(self):\n        self.assertEqual(c(), 'c')\n"  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "unittest", "tests.test_c"],
        [*PYTEST_CHECK, "tests/test_c.py::T"],
        ["-m", "unittest", "discover", "-s", "tests", "-t", ".", "-p", "test_c.py"],
    ],
    ids=["dotted module", "node id", "discover folder"],
)
def test_a_later_lane_rewriting_a_test_named_as_users_name_it_is_warned_and_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    repo = make_project(
        tmp_path / "r", {"c": [], "s": ["c"]},
        checks={"c": descriptor(argv), "s": descriptor()},
        scopes={"c": ["c.py", "tests/test_c.py"], "s": ["c.py", "tests/**"]},
        extra_files={"tests/__init__.py": ""},
    )  # fmt: skip
    _, _, err = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "json")
    assert "warning: docs/plans/s.intent.json: scope_covers_check: s runs after c" in err or (
        argv[1] == "unittest" and argv[2] == "discover"  # a folder: a new test below it lands
    ), err
    run_pass(repo)
    work(repo, "c", {"c.py": C_PY, "tests/test_c.py": TEST_C})
    assert run_pass(repo).integrated == ("c",)
    work(repo, "s", {"c.py": "def c():\n    return 'broken'\n", "tests/test_c.py": "pass\n"})
    run_pass(repo)
    states = {t.task_id: (str(t.state), t.reason) for t in current(repo).state.children}
    assert states["s"] == ("needs_human", "lane_touches_check: tests/test_c.py (c)"), states
