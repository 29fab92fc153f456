"""Ownership follows the plan's order (issue 58 #1, #3, #4; ADR 0066): the tasks before a check's
owner may build what it names, a later lane may add a test below a named folder but never change
what a landed check runs, an unordered task whose scope covers another's named path runs first,
and tests named as their users name them are protected. Real git, real checks, `imm run` and the
GitHub-shaped passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project, run_pass, work
from tests.conftest import PYTEST_CHECK, descriptor, git, run_cli
from tests.integration.test_judged_by_tests import imm_run


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
    code, said = imm_run(tmp_path, capsys, repo, writes)
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
