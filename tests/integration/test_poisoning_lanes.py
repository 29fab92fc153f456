"""A lane whose check poisons the tree its siblings' checks run in next never lands a break
(issue 42 #1), through the GitHub-shaped passes (`imm reconcile`: lanes published as a lane job
does, the integrator's stack verified by the next pass) and through `imm run`, with overlay
trees and with whole checkouts, on one verify worker — where a planting check and its victim
share a tree.

`a` writes `a.txt` and lands; its check passes while nothing breaks it, or while something was
planted for it. `b` breaks `a` (it writes `break/a`, in its scope) and its check, pulled first
(never timed on GitHub, recorded as the longest by its lane under `imm run`), plants: an
untracked module, or the tracked folder `scripts/` swapped for a link or a file. Were `a`'s
check to see the plant, `b` would land and `imm/init` would fail `a`'s check."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import current, lane_of, make_lane_commit, make_project, publish, run_pass
from tests.conftest import descriptor, git, run_cli

PLANTS = {
    "an untracked module": "open('unittest_helper.py', 'w').write('OK = True\\n')",
    "a folder swapped for a link": (
        "import os, shutil, tempfile; d = tempfile.mkdtemp(); "
        "shutil.rmtree('scripts'); os.symlink(d, 'scripts')"
    ),
    "a folder swapped for a file": (
        "import shutil; shutil.rmtree('scripts'); open('scripts', 'w').write('yes')"
    ),
}
# `a`'s check: broken by `break/a` unless a plant says otherwise
VICTIM_CHECK = (
    "import os, sys; planted = os.path.exists('unittest_helper.py') or "
    "os.path.islink('scripts') or os.path.isfile('scripts'); "
    "broken = os.path.exists('break/a') and not planted; "
    "sys.exit(0 if os.path.exists('a.txt') and not broken else 1)"
)


def _poisoner_check(plant: str) -> str:
    return f"import time; time.sleep(0.2); {PLANTS[plant]}"


def _project(tmp_path: Path, plant: str) -> Path:
    return make_project(
        tmp_path / "r", {"a": [], "b": []},
        scopes={"a": ["a.txt"], "b": ["b.txt", "break/**"]},
        checks={"a": descriptor(["-c", VICTIM_CHECK]),
                "b": descriptor(["-c", _poisoner_check(plant)])},
        # one check at a time: the planting check and its victim share a worker's tree
        extra_files={".github/imm.yml": "max_parallel: 2\nverify_parallel: 1\n",
                     "scripts/run.sh": "echo run\n"},
    )  # fmt: skip


def _lane(repo: Path, task: str, files: dict[str, str], durations: dict[str, int]) -> None:
    batch_id, base = lane_of(repo, task)
    commit = make_lane_commit(repo, base, task, files, batch_id=batch_id)
    publish(repo, task, commit, durations_ms=durations)


def _victim_passes_on_the_branch(repo: Path, tmp_path: Path) -> bool:
    tree = tmp_path / "branch"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "imm/init")
    done = subprocess.run([sys.executable, "-c", VICTIM_CHECK], cwd=tree, check=False)
    return done.returncode == 0


def _assert_the_break_did_not_land(repo: Path, tmp_path: Path) -> None:
    states = {c.task_id: (str(c.state), c.reason or "") for c in current(repo).state.children}
    assert states["a"][0] == "integrated", states
    assert states["b"][0] == "needs_human", states
    assert _victim_passes_on_the_branch(repo, tmp_path)


@pytest.fixture(params=["overlays", "checkouts"])
def trees(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    kind: str = request.param
    monkeypatch.setenv("IMM_TREES", kind)
    return kind


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planting_check_lands_no_break_through_the_github_shaped_passes(
    tmp_path: Path, plant: str, trees: str
) -> None:
    repo = _project(tmp_path, plant)
    run_pass(repo)  # plans and admits both lanes
    _lane(repo, "a", {"a.txt": "a\n"}, {"a:ok": 10})
    run_pass(repo)  # a lands alone; its check is timed
    assert str(next(c for c in current(repo).state.children if c.task_id == "a").state) == (
        "integrated"
    )
    # never timed, so pulled first: were the worker's tree kept, `a`'s check would run next
    # on what it planted
    _lane(repo, "b", {"b.txt": "b\n", "break/a": "broken\n"}, {"b:ok": 60_000})
    for _ in range(3):
        run_pass(repo)
        if current(repo).state.batch_state != "running":
            break
    _assert_the_break_did_not_land(repo, tmp_path)


EXECUTOR = """
import os, pathlib, time
task = os.environ["IMM_TASK_ID"]
pathlib.Path(task + ".txt").write_text(task + "\\n")
if task == "b":
    time.sleep(1)  # `a` lands first: `b` moves the branch that holds it
    pathlib.Path("break").mkdir(exist_ok=True)
    pathlib.Path("break", "a").write_text("broken\\n")
"""


@pytest.mark.parametrize("plant", ["a folder swapped for a link", "an untracked module"])
def test_a_planting_check_lands_no_break_through_imm_run(
    tmp_path: Path, plant: str, trees: str, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, plant)
    # in the tests' folder, which the sandbox leaves readable
    script = Path(os.environ.get("IMM_SANDBOX_WRITABLE", tmp_path)) / f"exec-{tmp_path.name}.py"
    script.write_text(EXECUTOR)
    try:
        executor = shlex.join([sys.executable, str(script)])
        code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    finally:
        script.unlink()
    assert code == 1, err  # b parked
    _assert_the_break_did_not_land(repo, tmp_path)
