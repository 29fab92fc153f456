"""What `imm run` says integration cost is what it cost (issue 30 #1): each stack line gives the
checks run and those carried over, and the run's closing lines give the batch's totals. The
checks count their own runs in a file, as a user's CI bill would."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from imm_action.integrate.flakes import FLAKE_RERUNS
from tests.batch_helpers import make_project, run_pass, work
from tests.conftest import descriptor, run_cli
from tests.integration.test_stack_verification import _CHECK, _own_check

EXECUTOR = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "lane_executor.py")]
)


def _counting_check(task: str, counter: Path) -> str:
    return descriptor(
        ["-c", f"import pathlib, sys; open({str(counter)!r}, 'a').write('run\\n'); "
         f"sys.exit(0 if pathlib.Path('{task}.txt').exists() else 1)"]
    )  # fmt: skip


def test_imm_run_counts_the_checks_its_background_worker_ran(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    counter = open_dir / "runs"  # integration checks may run as another user
    counter.touch()
    counter.chmod(0o666)
    tasks = {"a": [], "b": ["a"], "c": ["b"]}
    repo = make_project(
        tmp_path / "r", tasks, checks={t: _counting_check(t, counter) for t in tasks}
    )
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    lanes_ran = 3  # each lane checks its own task once
    integration_ran = len(counter.read_text().splitlines()) - lanes_ran
    stacks = re.findall(r"as one stack \([^)]*\): (\d+) check runs?(?:, (\d+) carried over)?", err)
    assert len(stacks) == 3
    assert sum(int(runs) for runs, _ in stacks) == integration_ran == 6  # a; a, b; a, b, c
    assert all(runs != "0" for runs, _ in stacks)
    assert f"integration: 3 stacks verified, {integration_ran} check runs, 0 carried over" in out


def test_the_base_check_is_counted_among_the_runs_integration_made(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    """Issue 61 #5: the branch check run on the base before any lane is one of integration's
    runs; the line says every process integration started."""
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(tmp_path / "behaviour.json"))
    (tmp_path / "behaviour.json").write_text("{}")
    counter = open_dir / "runs"
    suite = json.dumps(["check.py", "suite", str(counter)])
    config = (
        f"branch_checks:\n  - name: suite\n    command: {{executable: python3, argv: {suite}}}\n"
    )
    repo = make_project(
        tmp_path / "r", {"a": []}, checks={"a": _own_check("a", counter)},
        extra_files={"check.py": _CHECK, ".github/imm.yml": config, "suite.txt": ""},
    )  # fmt: skip
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    ran = counter.read_text().split()
    # the base's suite; the lane's own check in its lane; the stack's a and suite
    lanes_ran = 1
    assert sorted(ran) == ["a", "a", "suite", "suite"], ran
    assert f"integration: 1 stack verified, {len(ran) - lanes_ran} check runs" in out


def _run_two_ended_lanes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    checks: dict[str, str],
    extra_files: dict[str, str],
) -> tuple[int, str, str]:
    """`imm run` taking up a batch whose lanes (a and b, or each task `checks` names) all
    ended before it started: the first stack it verifies holds them all, whatever the
    timing."""
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(tmp_path / "behaviour.json"))
    (tmp_path / "behaviour.json").write_text("{}")
    repo = make_project(
        tmp_path / "r", {task: [] for task in checks}, checks=checks,
        extra_files={"check.py": _CHECK, **extra_files},
    )  # fmt: skip
    run_pass(repo)
    for task in checks:
        work(repo, task)
    return run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)


def test_the_stack_without_a_culprit_below_the_top_is_verified_beside_its_trial(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    """b breaks a's check; c lies above it. While b is tried, the stack without it (a, c) is
    verified beside the trial: the stack that follows takes those runs, each counted once."""
    counter = open_dir / "runs"
    checks = {task: _own_check(task, counter, *(["b.txt"] if task == "a" else []))
              for task in ("a", "b", "c")}  # fmt: skip
    code, out, err = _run_two_ended_lanes(
        tmp_path, capsys, monkeypatch, checks, {".github/imm.yml": "max_parallel: 3\n"}
    )
    assert code == 1, err  # b is parked
    ran = counter.read_text().split()
    assert "bisection found b" in err
    assert "verified 2 lanes as one stack (a, c): 2 check runs, every check passed" in err
    assert f"integration: 2 stacks verified, {len(ran)} check runs, 0 carried over" in out
    stacks = re.findall(r"as one stack \([^)]*\): (\d+) check runs?", err)
    assert sum(int(runs) for runs in stacks) == len(ran)


def test_a_stack_rebuilt_after_bisection_counts_no_run_its_judgement_reused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    """b breaks a's check. The stack of both: its top, then bisection's probe of a's candidate;
    the stack rebuilt without b is that candidate, judged by the probe's result — no run of
    its own, and none counted."""
    counter = open_dir / "runs"
    checks = {"a": _own_check("a", counter, "b.txt"), "b": _own_check("b", counter)}
    config = {".github/imm.yml": "max_parallel: 2\n"}
    code, out, err = _run_two_ended_lanes(tmp_path, capsys, monkeypatch, checks, config)
    assert code == 1, err  # b is parked
    ran = counter.read_text().split()
    # the top's two checks (side by side: in either order); a's rerun there, its probe on a's
    # candidate, its last reruns on b's, a fresh run on a's before b is blamed (issue 61)
    assert sorted(ran[:2]) == ["a", "b"], ran
    assert ran[2:] == ["a"] * (2 + FLAKE_RERUNS), ran
    assert "verified 2 lanes as one stack (a, b): 7 check runs; bisection found b" in err
    assert "verified 1 lane as one stack (a): 0 check runs, every check passed" in err
    assert f"integration: 2 stacks verified, {len(ran)} check runs, 0 carried over" in out


def test_a_later_pass_counts_no_run_an_earlier_pass_counted(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    """b breaks the branch check. Bisection runs it on a's candidate; the stack rebuilt without
    b still owes a's own check there, so a later pass judges it — after the failures were
    dropped from the cache — reusing the branch check's pass: one run, not two."""
    counter = open_dir / "runs"
    suite = json.dumps(["check.py", "suite", str(counter), "rule:b.txt"])
    config = (
        "max_parallel: 2\nbranch_checks:\n  - name: suite\n"
        f"    command: {{executable: python3, argv: {suite}}}\n"
    )
    checks = {"a": _own_check("a", counter), "b": _own_check("b", counter)}
    extra = {".github/imm.yml": config, "suite.txt": ""}
    code, out, err = _run_two_ended_lanes(tmp_path, capsys, monkeypatch, checks, extra)
    assert code == 1, err  # b is parked
    ran = counter.read_text().split()[1:]  # after the base's check: the suite, once
    # the top's three, the suite's rerun there, its probe on a's candidate (the head's
    # recorded verdict serves), two more reruns on b's and a fresh run on a's before b is
    # blamed; then a's there
    assert sorted(ran) == ["a", "a", "b", *["suite"] * (3 + FLAKE_RERUNS)], ran
    assert "verified 2 lanes as one stack (a, b): 8 check runs; bisection found b" in err
    assert "verified 1 lane as one stack (a): 1 check run, every check passed" in err
    assert f"integration: 2 stacks verified, {len(ran)} check runs, 0 carried over" in out


def test_a_task_check_running_the_branch_checks_command_runs_once_on_a_tree(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    """Issue 61 #3: a's check is the branch check's command with a time limit of its own. On
    each tree it runs once, both ids get the verdict, and the stack line says so."""
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(tmp_path / "behaviour.json"))
    (tmp_path / "behaviour.json").write_text("{}")
    counter = open_dir / "runs"
    argv = ["check.py", "suite", str(counter)]
    config = (
        "branch_checks:\n  - name: suite\n"
        f"    command: {{executable: python3, argv: {json.dumps(argv)}}}\n"
    )
    repo = make_project(
        tmp_path / "r", {"a": []}, checks={"a": descriptor(argv, timeout_ms=120_000)},
        extra_files={"check.py": _CHECK, ".github/imm.yml": config, "suite.txt": ""},
    )  # fmt: skip
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    # the base's suite; a's check in its lane; the stack's top: one run for both
    assert counter.read_text().split() == ["suite"] * 3
    assert (
        "verified 1 lane as one stack (a): 1 check run, 1 given by another check's run of the "
        "same command, every check passed on its top"
    ) in err
    assert "integration: 1 stack verified, 2 check runs" in out
