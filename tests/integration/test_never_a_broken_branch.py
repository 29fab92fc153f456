"""The batch branch only moves to a tree on which the checks of every task it holds pass
(SPEC §5.4, issue 28): a lane whose base already holds the task it breaks is parked, in either
way its base came to hold it, and so is a retry of it. The project is a small package with its
own pytest suite; the checks are real pytest runs."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from imm_action.integrate.flakes import FLAKE_RERUNS
from imm_action.model.outcome import CheckResult
from tests.batch_helpers import current, file_check, head_of, make_project, run_pass, work
from tests.conftest import PYTEST_CHECK, descriptor, git, run_cli, snapshot

_HELPERS = "def _add(a, b):\n    return a + b\n"
_RENAMED = "def _plus(a, b):\n    return a + b\n"
_DOUBLE = "from calc._helpers import _add\n\n\ndef double(x):\n    return _add(x, x)\n"
_TEST_DOUBLE = "from calc.double import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
_TEST_HELPERS = (
    "from calc._helpers import _plus\n\n\ndef test_plus():\n    assert _plus(1, 2) == 3\n"
)


@pytest.fixture(autouse=True)
def _pytest_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks run `python3 -m pytest`: the interpreter running these tests has it."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _pytest_check(test_file: str) -> str:
    return descriptor([*PYTEST_CHECK, test_file])


def _package(tmp_path: Path, tasks: dict[str, list[str]], max_parallel: int) -> Path:
    """`d` adds `calc.double` on the private helper `_add`, with its test; `r` renames the
    helper to `_plus`, with a test of its own — which breaks `d`'s test."""
    scopes = {"d": ["calc/double.py", "tests/test_double.py"],
              "r": ["calc/_helpers.py", "tests/test_helpers.py"]}  # fmt: skip
    checks = {"d": _pytest_check("tests/test_double.py"),
              "r": _pytest_check("tests/test_helpers.py")}  # fmt: skip
    return make_project(
        tmp_path / "r", tasks, scopes=scopes, checks=checks,
        extra_files={
            "calc/__init__.py": "", "calc/_helpers.py": _HELPERS,
            ".github/imm.yml": f"max_parallel: {max_parallel}\n",
            "tests/conftest.py": "import sys, pathlib\n"
            "sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\n",
        },
    )  # fmt: skip


def _do_d(repo: Path) -> None:
    work(repo, "d", {"calc/double.py": _DOUBLE, "tests/test_double.py": _TEST_DOUBLE})


def _do_r(repo: Path) -> None:
    work(repo, "r", {"calc/_helpers.py": _RENAMED, "tests/test_helpers.py": _TEST_HELPERS})


def _states(repo: Path) -> dict[str, tuple[str, str]]:
    return {c.task_id: (str(c.state), c.reason or "") for c in current(repo).state.children}


def _suite_passes_on_branch(repo: Path, tmp_path: Path) -> bool:
    """The whole suite of what `imm/init` holds, run in a fresh checkout of it."""
    tree = tmp_path / "branch"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "imm/init")
    import subprocess

    done = subprocess.run(
        [sys.executable, *PYTEST_CHECK, "tests"],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


def test_a_lane_breaking_the_task_it_depends_on_is_parked(tmp_path: Path) -> None:
    # r is blocked by d: r's lane base holds d, and r's own test passes there
    repo = _package(tmp_path, {"d": [], "r": ["d"]}, max_parallel=2)
    run_pass(repo)
    _do_d(repo)
    run_pass(repo)  # d lands; r is admitted on it
    _do_r(repo)
    run_pass(repo)
    state, reason = _states(repo)["r"]
    assert state == "needs_human"
    assert reason.startswith("batch_integration_check_failed: d:ok failed on candidate ")
    assert _suite_passes_on_branch(repo, tmp_path)


def test_a_lane_started_after_a_sibling_landed_cannot_break_it(tmp_path: Path) -> None:
    # independent, one lane at a time: r starts on a head that already holds d
    repo = _package(tmp_path, {"d": [], "r": []}, max_parallel=1)
    run_pass(repo)
    _do_d(repo)
    run_pass(repo)
    _do_r(repo)
    run_pass(repo)
    assert _states(repo)["r"][1].startswith("batch_integration_check_failed: d:ok failed")
    assert _suite_passes_on_branch(repo, tmp_path)


def test_a_retried_lane_does_not_land_the_tree_recorded_failing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _package(tmp_path, {"d": [], "r": []}, max_parallel=2)
    run_pass(repo)
    _do_d(repo)
    _do_r(repo)
    run_pass(repo)  # one stack: bisection parks r
    assert _states(repo)["r"][1].startswith("batch_integration_check_failed: d:ok failed")
    code, _, err = run_cli(capsys, "retry", "init", "r", "--repo", str(repo))
    assert code == 0, err
    run_pass(repo)  # r admitted again, on a head that holds d
    _do_r(repo)  # the same work again
    run_pass(repo)
    state, reason = _states(repo)["r"]
    assert state == "needs_human"
    assert reason.startswith("batch_integration_check_failed: d:ok failed on candidate ")
    assert current(repo).state.batch_state != "completed"
    assert _suite_passes_on_branch(repo, tmp_path)


def test_a_completed_batch_says_how_many_checks_passed_on_its_head(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)
    work(repo, "b")
    run_pass(repo)
    stored = current(repo)
    assert stored.state.batch_state == "completed"
    assert stored.report is not None
    assert stored.report.reason == (
        "all 2 tasks integrated into imm/init; every check of them (2 checks) passed on its head"
    )


def _count_runs(counter: Path) -> str:
    return descriptor(
        ["-c", f"import pathlib; p = pathlib.Path({str(counter)!r}); "
         "p.write_text(p.read_text() + 'x' if p.exists() else 'x')"]
    )  # fmt: skip


def test_an_integrated_tasks_check_runs_again_on_every_move(tmp_path: Path) -> None:
    counter = tmp_path / "a-runs"
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"], "c": ["b"]},
                        checks={"a": _count_runs(counter)})  # fmt: skip
    run_pass(repo)
    for task in ("a", "b", "c"):
        work(repo, task)
        run_pass(repo)
    assert current(repo).state.batch_state == "completed"
    assert counter.read_text() == "xxx"  # on a's move, b's and c's


def test_a_check_declaring_what_it_reads_carries_its_pass_over_a_move_that_changes_none_of_it(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "a-runs"
    counted = json.loads(_count_runs(counter))
    counted["reads"] = ["a.txt", "lib/**"]
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"], "c": ["b"]},
                        checks={"a": json.dumps(counted), "c": file_check("lib/c.txt", "c")},
                        scopes={"c": ["lib/c.txt"]})  # fmt: skip
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)
    work(repo, "b")  # changes b.txt: nothing a reads
    result = run_pass(repo)
    assert counter.read_text() == "x"
    assert [(s.check_runs, s.carried) for s in result.stacks] == [(1, 1)]
    assert "1 check run, 1 carried over" in result.stacks[0].line()
    work(repo, "c", {"lib/c.txt": "c\n"})  # changes lib/: a's check runs again
    run_pass(repo)
    assert counter.read_text() == "xx"
    assert current(repo).state.batch_state == "completed"


def test_the_report_says_which_checks_ran_on_the_head_and_which_their_reads_carried_over(
    tmp_path: Path,
) -> None:
    """Issue 42 #5: `every check of them (2 checks) passed on its head`, though a's did not
    run on that head."""
    counter = tmp_path / "a-runs"
    counted = json.loads(_count_runs(counter))
    counted["reads"] = ["a.txt"]
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]}, checks={"a": json.dumps(counted)})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)
    work(repo, "b")  # changes b.txt: nothing a reads
    run_pass(repo)
    stored = current(repo)
    assert (stored.state.head_checks, stored.state.head_checks_carried) == (2, 1)
    assert stored.report is not None
    assert stored.report.reason == (
        "all 2 tasks integrated into imm/init; every check of them passed: 1 check on its "
        "head, 1 carried over by their declared reads"
    )


def test_a_check_failing_on_the_batch_head_itself_is_run_again_then_left_to_a_person(
    tmp_path: Path,
) -> None:
    # a's check depends on the environment, which changes after a landed
    switch = tmp_path / "broken"
    runs = tmp_path / "runs"
    env_check = descriptor(
        ["-c", f"import pathlib, sys; runs = pathlib.Path({str(runs)!r}); "
         "runs.write_text((runs.read_text() if runs.exists() else '') + 'x'); "
         f"sys.exit(1 if pathlib.Path({str(switch)!r}).exists() else 0)"]
    )  # fmt: skip
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": []},
                        checks={"a": env_check},
                        extra_files={".github/imm.yml": "max_parallel: 1\n"})  # fmt: skip
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)  # a lands: its check ran once
    head = head_of(repo, "imm/init")
    switch.write_text("")
    work(repo, "b")
    result = run_pass(repo)
    stored = current(repo)
    children = _states(repo)
    assert children["b"] == ("lane_committed", "")  # not blamed
    assert head_of(repo, "imm/init") == head
    assert stored.state.batch_state == "needs_human"
    assert stored.report is not None
    assert stored.report.reason.startswith(
        f"batch_head_check_failed: a:ok failed on every run on imm/init at {head[:12]} itself"
    )
    # when a landed; on the top, once more there; the head's recorded verdict serves, so
    # bisection comes to b's candidate: two more reruns there, then a fresh run on its parent,
    # the head, which fails (issue 61: the head is not run twice whatever it just passed)
    assert runs.read_text() == "x" * (1 + 2 + FLAKE_RERUNS)
    assert "failed on every run on the batch head itself" in result.stacks[-1].line()
    switch.unlink()  # a person fixes the environment
    run_pass(repo)
    assert _states(repo)["b"][0] == "integrated"


_GENERATED = {f"gen/{i:05}.txt": "x\n" for i in range(10_000)}
_FLOOD = descriptor(
    ["-c", "import pathlib; [p.write_text('y') for p in pathlib.Path('gen').iterdir()]"]
)


def test_a_check_changing_ten_thousand_files_gets_a_verdict_and_the_batch_goes_on(
    tmp_path: Path,
) -> None:
    # as a formatter would: every tracked file of a generated tree rewritten
    repo = make_project(tmp_path / "r", {"a": [], "b": []}, checks={"a": _FLOOD},
                        extra_files=_GENERATED)  # fmt: skip
    run_pass(repo)
    work(repo, "a")
    work(repo, "b")
    result = run_pass(repo)
    children = current(repo).state.children
    parked = next(c for c in children if c.task_id == "a")
    assert parked.reason is not None
    assert parked.reason.startswith("batch_integration_check_failed: a:ok failed on candidate")
    assert result.integrated == ("b",)
    (failure,) = parked.failures
    assert len(failure.changed_outside) == 100
    assert failure.changed_outside[-1] == "… and 9901 more"


def test_a_check_result_with_ten_thousand_changed_paths_is_cut_where_it_is_built() -> None:
    result = CheckResult(
        check_id="a:ok", passed=False, exit_code=0, duration_ms=1, timed_out=False,
        output_limited=False, changed_outside=[f"gen{i}.txt" for i in range(10_000)],
        output_tail="",
    )  # fmt: skip
    assert len(result.changed_outside) == 100
    assert result.changed_outside[-1] == "… and 9901 more"


# -- no task disappears ----------------------------------------------------------------------
def _with_a_broken_intent(tmp_path: Path) -> Path:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    (repo / "docs/plans/b.intent.json").write_text(
        '{\n  "contract": "assurance_kernel/task_intent/v1",\n  "task_id": 7\n}\n'
    )
    git(repo, "commit", "-qam", "b's intent broken")
    return repo


def _refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname)", "refs/imm", "refs/heads/imm")


@pytest.mark.parametrize("command", ["run", "reconcile"])
def test_an_invalid_intent_stops_the_batch_before_any_lane_naming_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    repo = _with_a_broken_intent(tmp_path)
    before = snapshot(repo)
    extra = ["--executor", "true"] if command == "run" else ["--admit"]
    code, out, err = run_cli(capsys, command, "init", "--repo", str(repo), *extra)
    assert code == 2
    assert "docs/plans/b.intent.json:3:" in err
    assert "no lane starts while 1 task of init has no valid intent (b)" in err
    assert "completed" not in out + err
    assert _refs(repo) == ""  # no batch, no branch, no lane
    assert snapshot(repo) == before  # nor a file: not the executor's record, not a lock


def test_a_missing_intent_is_named_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    git(repo, "rm", "-q", "docs/plans/b.intent.json")
    git(repo, "commit", "-qm", "b's intent gone")
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", "true")
    assert code == 2
    assert "docs/plans/b.intent.json" in err
    assert _refs(repo) == ""


# -- the files a plan's check names are the plan's -------------------------------------------
def test_a_lane_rewriting_the_script_a_siblings_check_runs_is_refused(tmp_path: Path) -> None:
    check_c = descriptor(["scripts/check_c.sh"], executable="sh")
    repo = make_project(
        tmp_path / "r", {"c": [], "s": []},
        checks={"c": check_c}, scopes={"c": ["c.txt"], "s": ["scripts/**"]},
        extra_files={"scripts/check_c.sh": "grep -qx good c.txt\n"},
    )  # fmt: skip
    run_pass(repo)
    work(repo, "s", {"scripts/check_c.sh": "exit 0\n", "scripts/s.txt": "s\n"})
    work(repo, "c", {"c.txt": "bad\n"})
    run_pass(repo)
    states = _states(repo)
    assert states["s"] == ("needs_human", "lane_touches_check: scripts/check_c.sh (c)")
    assert states["c"][1].startswith("batch_integration_check_failed: c:ok failed")
    assert git(repo, "show", "imm/init:scripts/check_c.sh") == "grep -qx good c.txt\n"


def test_a_later_lane_rewriting_a_test_its_owner_wrote_in_this_batch_is_refused(
    tmp_path: Path,
) -> None:
    """Issue 42 #2: c's lane writes the test its own check runs (absent at the plan's commit);
    s, whose scope covers tests/**, rewrites it to pass."""
    check_c = descriptor(["tests/test_c.py"])
    repo = make_project(
        tmp_path / "r", {"c": [], "s": ["c"]},
        checks={"c": check_c, "s": descriptor()},
        scopes={"c": ["c.txt", "tests/test_c.py"], "s": ["tests/**"]},
    )  # fmt: skip
    run_pass(repo)
    test_c = "import pathlib, sys; sys.exit(pathlib.Path('c.txt').read_text() != 'good\\n')\n"
    work(repo, "c", {"c.txt": "good\n", "tests/test_c.py": test_c})
    run_pass(repo)
    work(repo, "s", {"tests/test_c.py": "pass\n", "tests/test_s.py": "pass\n"})
    run_pass(repo)
    states = _states(repo)
    assert states["c"][0] == "integrated"
    assert states["s"] == ("needs_human", "lane_touches_check: tests/test_c.py (c)")
    assert git(repo, "show", "imm/init:tests/test_c.py") == test_c
    report = current(repo).report
    assert report is not None
    assert "narrow its scope_hint to leave the path out" in report.next_action  # not "retry"


def _c_landed_naming_a_folder(tmp_path: Path) -> Path:
    """c's check, `python3 -m unittest discover -s tests/c`, names the folder; c has landed,
    and s, after it, may change tests/**."""
    check_c = descriptor(["-m", "unittest", "discover", "-s", "tests/c"])
    repo = make_project(
        tmp_path / "r", {"c": [], "s": ["c"]},
        checks={"c": check_c, "s": descriptor()}, scopes={"c": ["c.txt"], "s": ["tests/**"]},
        extra_files={"tests/c/test_c.py": "import unittest\n"},
    )  # fmt: skip
    run_pass(repo)
    work(repo, "c")
    run_pass(repo)
    return repo


def test_a_later_lane_changing_a_file_below_a_folder_a_landed_check_names_is_refused(
    tmp_path: Path,
) -> None:
    """Once c has landed, what lies below the folder its check names is c's: a later lane
    may add a file there, never change one (issue 58)."""
    repo = _c_landed_naming_a_folder(tmp_path)
    work(repo, "s", {"tests/c/test_c.py": "raise SystemExit(0)\n"})
    run_pass(repo)
    assert _states(repo)["s"] == ("needs_human", "lane_touches_check: tests/c/test_c.py (c)")


def test_a_later_lane_adding_a_file_below_a_folder_a_landed_check_names_lands(
    tmp_path: Path,
) -> None:
    """Issue 58 #1: a new test below a named folder is not a change to what the check names."""
    repo = _c_landed_naming_a_folder(tmp_path)
    work(repo, "s", {"tests/c/test_s.py": "import unittest\n"})
    assert run_pass(repo).integrated == ("s",)


def test_a_lane_may_rewrite_the_script_its_own_check_runs(tmp_path: Path) -> None:
    check_c = descriptor(["scripts/check_c.sh"], executable="sh")
    repo = make_project(
        tmp_path / "r", {"c": []}, checks={"c": check_c},
        scopes={"c": ["c.txt", "scripts/check_c.sh"]},
        extra_files={"scripts/check_c.sh": "exit 1\n"},
    )  # fmt: skip
    run_pass(repo)
    work(repo, "c", {"c.txt": "good\n", "scripts/check_c.sh": "grep -qx good c.txt\n"})
    assert run_pass(repo).integrated == ("c",)


# -- the branch holds only verified work -----------------------------------------------------
def _push_by_hand(repo: Path, onto: str) -> str:
    (repo / "x.txt").write_text("pushed by hand\n")
    git(repo, "add", "x.txt")
    tree = git(repo, "write-tree").strip()
    git(repo, "rm", "-q", "--cached", "x.txt")
    (repo / "x.txt").unlink()
    foreign = git(repo, "commit-tree", tree, "-p", onto, "-m", "by hand").strip()
    git(repo, "update-ref", "refs/heads/imm/init", foreign)
    return foreign


def test_a_refused_foreign_commit_is_quarantined_the_branch_put_back_and_the_batch_goes_on(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)  # a lands; b's lane is still at work
    verified = head_of(repo, "imm/init")
    foreign = _push_by_hand(repo, verified)
    run_pass(repo)
    stored = current(repo)
    batch = stored.state.batch_id
    assert stored.state.batch_state == "running"
    assert head_of(repo, "imm/init") == verified
    assert head_of(repo, f"refs/imm/quarantine/{batch}/1") == foreign
    assert stored.report is not None
    [said] = stored.report.quarantined
    assert f"{foreign} (pushed onto imm/init outside imm) is kept as " in said
    assert f"refs/imm/quarantine/{batch}/1; imm/init went back to {verified[:12]}" in said
    assert "merge it into main (a continuation of a stopped batch merges main in" in said
    work(repo, "b")
    run_pass(repo)
    assert current(repo).state.batch_state == "completed"  # b landed as usual


def test_a_foreign_push_while_two_lanes_run_is_quarantined_and_both_lanes_land(
    tmp_path: Path,
) -> None:
    """Issue 42 #4: a maintainer's honest push cost every lane in flight."""
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)  # a and b admitted
    base = head_of(repo, "imm/init")
    foreign = _push_by_hand(repo, base)
    work(repo, "a")
    work(repo, "b")
    run_pass(repo)
    stored = current(repo)
    assert stored.state.batch_state == "completed"
    assert [c.task_id for c in stored.state.children if c.state.done] == ["a", "b"]
    assert head_of(repo, f"refs/imm/quarantine/{stored.state.batch_id}/1") == foreign
    assert foreign not in git(repo, "rev-list", "imm/init").split()


def test_a_lane_check_changing_ten_thousand_files_parks_its_task_and_the_batch_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    executor = shlex.join([sys.executable, str(Path(__file__).parents[1] / "lane_executor.py")])
    repo = make_project(tmp_path / "r", {"a": [], "b": []}, checks={"a": _FLOOD},
                        extra_files=_GENERATED)  # fmt: skip
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    assert code == 1, err
    states = _states(repo)
    assert states["a"] == ("needs_human", "QA failure limit reached")
    assert states["b"] == ("integrated", "")
    (failure,) = next(c for c in current(repo).state.children if c.task_id == "a").failures
    assert len(failure.changed_outside) == 100
    assert failure.changed_outside[-1] == "… and 9901 more"


# -- reports that lead with the cause (issue 30 #2) ------------------------------------------
def test_status_of_a_task_breaking_seven_checks_fits_a_screen_and_shows_the_error_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # d has seven tests on the helper, each its own check; r renames the helper
    files = {f"tests/test_double{k}.py": _TEST_DOUBLE for k in range(7)}
    repo = make_project(
        tmp_path / "r", {"d": [], "r": ["d"]},
        scopes={"d": ["calc/double.py", "tests/test_double*.py"],
                "r": ["calc/_helpers.py", "tests/test_helpers.py"]},
        checks={"r": _pytest_check("tests/test_helpers.py")},
        extra_files={"calc/__init__.py": "", "calc/_helpers.py": _HELPERS,
                     "tests/conftest.py": "import sys, pathlib\n"
                     "sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\n"},
    )  # fmt: skip
    acceptance = [
        {"id": f"t{k}", "assertion": "doubles", "verification": _pytest_check(path)}
        for k, path in enumerate(files)
    ]
    plan = repo / "docs/plans/d.intent.json"
    data = json.loads(plan.read_text())
    plan.write_text(json.dumps({**data, "acceptance": acceptance}))
    git(repo, "commit", "-qam", "d's seven checks")
    run_pass(repo)
    work(repo, "d", {"calc/double.py": _DOUBLE, **files})
    run_pass(repo)
    _do_r(repo)
    run_pass(repo)
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert sum("ImportError: cannot import name '_add'" in line for line in lines) == 1
    assert "(the same error in 7 commands)" in out
    assert sum(line.strip().startswith(f"d:t{k}: ") for k in range(7) for line in lines) == 7
    full = next(line for line in lines if line.startswith("every failure in full: "))
    logged = Path(full.removeprefix("every failure in full: ")).read_text()
    assert logged.count("ImportError: cannot import name '_add'") >= 7  # nothing lost
