"""One reconcile pass over many ready lanes verifies them as one stack (SPEC §5.4): each
distinct check once on the top, a failing one bisected alone to its culprit, and the batch
branch only ever at a tree that passed every check of every lane it adds."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from imm_action.integrate.flakes import FLAKE_RERUNS
from tests.batch_helpers import current, head_of, make_project, run_pass, work
from tests.conftest import as_github_step, descriptor, run_cli

# A task's own check: its file is there, and what the arguments name holds. Each run leaves a
# line in the counter, so a test counts descriptor runs as a user's CI bill would.
_CHECK = """\
import pathlib, sys
task, counter, *rules = sys.argv[1:]
with open(counter, "a") as runs:
    runs.write(task + "\\n")
ok = pathlib.Path(task + ".txt").exists()
for rule in rules:  # "rule:breaker" or "rule:breaker|mender": breaker there, mender absent
    breaker, _, mender = rule.removeprefix("rule:").partition("|")
    broken = pathlib.Path(breaker).exists() and not (mender and pathlib.Path(mender).exists())
    ok = ok and not broken
sys.exit(0 if ok else 1)
"""


def _own_check(task: str, counter: Path, *rules: str) -> str:
    # the rules are not paths the check names (`rule:t04.txt`): another task's lane writes
    # t04.txt, which a check naming it would make its own (lane_touches_check, issue 42 #2)
    return descriptor(["check.py", task, str(counter), *(f"rule:{rule}" for rule in rules)])


def _round(
    tmp_path: Path,
    size: int,
    rules: Mapping[str, tuple[str, ...]] | None = None,
    counted_in: Path | None = None,
    parallel: int = 2,
) -> tuple[Path, Path, list[str]]:
    """`size` lanes admitted from one base, each with a check of its own (`rules`: what
    breaks it), all ended. `counted_in`: where checks count their runs (one a check running as
    another user can write)."""
    counter = (counted_in or tmp_path) / "runs"
    tasks = [f"t{index:02d}" for index in range(size)]
    checks = {task: _own_check(task, counter, *(rules or {}).get(task, ())) for task in tasks}
    config = f"max_parallel: {size}\nverify_parallel: {parallel}\n"
    repo = make_project(
        tmp_path / "r", {task: [] for task in tasks}, checks=checks,
        extra_files={".github/imm.yml": config, "check.py": _CHECK},
    )  # fmt: skip
    run_pass(repo)
    for task in tasks:
        work(repo, task)
    return repo, counter, tasks


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _on_branch(repo: Path, path: str) -> bool:
    found = subprocess.run(
        ["git", "cat-file", "-e", f"imm/init:{path}"], cwd=repo, capture_output=True, check=False
    )
    return found.returncode == 0


def test_a_pass_over_24_ready_lanes_runs_each_lanes_check_once(tmp_path: Path) -> None:
    repo, counter, tasks = _round(tmp_path, 24)
    result = run_pass(repo)
    assert result.integrated == tuple(tasks)
    assert _runs(counter) == 24  # per candidate: 24 · 25 / 2 = 300
    assert _runs(counter) <= 36


def test_two_interfering_lanes_are_parked_and_the_other_22_land(tmp_path: Path) -> None:
    # t09's own check fails once t04 is there; t17 breaks t03's check
    repo, counter, tasks = _round(tmp_path, 24, {"t09": ("t04.txt",), "t03": ("t17.txt",)})
    result = run_pass(repo)
    assert result.integrated == tuple(t for t in tasks if t not in ("t09", "t17"))
    states = {child.task_id: child.reason or "" for child in current(repo).state.children}
    assert states["t09"].startswith("batch_integration_check_failed: t09:ok failed on candidate ")
    assert states["t17"].startswith("batch_integration_check_failed: t03:ok failed on candidate ")
    assert not _on_branch(repo, "t09.txt")
    assert not _on_branch(repo, "t17.txt")
    assert _runs(counter) <= 72  # per candidate: 769


def test_a_culprit_is_named_with_the_first_candidate_its_check_fails_on(tmp_path: Path) -> None:
    repo, _, _ = _round(tmp_path, 6, {"t01": ("t03.txt",), "t02": ("t03.txt",)})
    run_pass(repo)
    children = current(repo).state.children
    culprit = next(c for c in children if c.task_id == "t03")
    candidates = subprocess.run(
        ["git", "rev-list", "--reverse", "imm/init"], cwd=repo, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    assert culprit.reason is not None
    assert culprit.reason.startswith("batch_integration_check_failed: t01:ok, t02:ok failed on")
    failed_on = culprit.reason.rsplit(" ", 1)[1]
    assert failed_on not in candidates  # history of a stack that never landed
    assert [f.step for f in culprit.failures] == ["t01:ok", "t02:ok"]


def test_the_stack_without_a_suspect_runs_ahead_only_where_workers_allow(tmp_path: Path) -> None:
    # t02 breaks t00's check. With two workers, the stack without t02 is verified beside its
    # trial; with `verify_parallel: 1` (checks that cannot share the machine), after it
    lines: dict[int, list[str]] = {}
    for parallel in (2, 1):
        repo, _, _ = _round(tmp_path / str(parallel), 4, {"t00": ("t02.txt",)}, parallel=parallel)
        lines[parallel] = []
        result = run_pass(repo, log=lines[parallel])
        assert result.integrated == ("t00", "t01", "t03")
    after = "verified 3 lanes as one stack (t00, t01, t03): "
    assert any(line.startswith(f"{after}0 check runs, 3 run ahead") for line in lines[2])
    assert any(line.startswith(f"{after}3 check runs, every check") for line in lines[1])


def test_a_lane_fixing_what_an_earlier_lane_of_its_stack_broke_lands_with_it(
    tmp_path: Path,
) -> None:
    # t02 breaks t00's check, t04 mends it: the top passes every check, so both land (as bors)
    repo, _, tasks = _round(tmp_path, 6, {"t00": ("t02.txt|t04.txt",)})
    result = run_pass(repo)
    assert result.integrated == tuple(tasks)


def test_the_branch_moves_only_to_the_top_of_a_verified_stack(tmp_path: Path) -> None:
    repo, _, tasks = _round(tmp_path, 5)
    before = head_of(repo, "imm/init")
    run_pass(repo)
    state = current(repo).state
    # each lane is integrated at its own commit inside the stack; the branch is at the top
    assert head_of(repo, "imm/init") == state.commits[-1]
    moves = subprocess.run(
        ["git", "reflog", "--format=%H", "imm/init"], cwd=repo, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    assert moves[:2] == [state.commits[-1], before]
    assert len(state.commits) == len(tasks)


def test_the_integrate_jobs_summary_says_what_its_stack_verification_found(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    repo, _, _ = _round(tmp_path, 4, {"t00": ("t02.txt",)}, counted_in=open_dir)
    summary = as_github_step(monkeypatch, tmp_path)
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo))
    assert code == 1, err  # a lane was parked: a person must look
    text = summary.read_text()
    assert "### Integration" in text
    # the top's four, t00's rerun there, two probes, its reruns on t02's candidate and a fresh
    # run on t02's parent (issue 61) — and, beside t02's trial, the three checks of the stack
    # without it, which the next stack takes: a culprit costs the lanes above it no second round
    runs = 4 + 1 + 2 + FLAKE_RERUNS + 1 + 3
    assert f"- verified 4 lanes as one stack (t00, t01, t02, t03): {runs} check runs; " in text
    assert "bisection found t02 (t00:ok first failed on " in text
    assert (
        "- verified 3 lanes as one stack (t00, t01, t03): 0 check runs, 3 run ahead while a "
        "lane below was tried, every check passed on its top"
    ) in text
    assert "imm: verified 4 lanes as one stack" in err  # the job's log says it too
