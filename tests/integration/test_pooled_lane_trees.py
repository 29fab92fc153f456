"""Lanes and checks reuse a pool of persistent trees (issue 13, decision 0028): whatever a lane's
executor did to its tree, its repository or the slot around it, the next lane taking the same
tree sees a complete, clean tree of exactly its own lane base, and only its own change lands.
Every attack is really made, by a real executor process in a real lane, against real git."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.verify.overlay_memory import memory_path
from imm_action.verify.trees import checked_out, tidy_pool
from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, git
from tests.integration.test_local_run import imm_run_argv

POOL_EXECUTOR = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "pool_executor.py")]
)


def _tree_check() -> str:
    """A descriptor that passes only on the project's files plus `good.txt`, untouched (the
    intents and the initiative are listed by path: they hold this very check)."""
    files = {
        "config.txt": "mode=ok\n",
        "shared.txt": "base\n",
        "good.txt": "good\n",
        "docs/initiatives/init.md": None,
        "docs/plans/bad.intent.json": None,
        "docs/plans/good.intent.json": None,
    }
    code = (
        "import os, sys, json; want = json.loads(sys.argv[1]); found = {}\n"
        "for d, dirs, files in os.walk('.'):\n"
        "    for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:\n"
        "        p = os.path.join(d, f)[2:]\n"
        "        ok = os.path.isfile(p) and not os.path.islink(p)\n"
        "        found[p] = (want.get(p) and open(p).read()) if ok else 'not a file'\n"
        "sys.exit(0 if found == want else 1)"
    )
    # argv may hold no control character: the program travels as a literal
    return descriptor(["-c", f"exec({code!r})", json.dumps(files)])


def _run_bad_then_good(
    tmp_path: Path, extra_env: dict[str, str] | None = None
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """`bad` tampers and fails; `good` runs after it, one lane at a time."""
    repo = make_project(tmp_path / "r", {"bad": [], "good": []}, checks={"good": _tree_check()})
    out = tmp_path / "out"
    out.mkdir()
    argv = [*imm_run_argv(repo)[:-1], POOL_EXECUTOR, "--max-parallel", "1"]
    env = {**os.environ, "IMM_TEST_DIR": str(out), **(extra_env or {})}
    done = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=120)
    return repo, out, done


def _pool_slots(repo: Path) -> list[Path]:
    """The slots of the repository's pool of trees; there is at least one after a run."""
    slots = list((repo / ".git/imm/trees").glob("slot-*"))
    assert slots
    return slots


@pytest.fixture(params=["checkouts", "overlays"])
def after_tampering(
    tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """Taken from the pool of whole checkouts, or as overlays over its base (ADR 0055): the
    same attacks, the same clean trees."""
    return _run_bad_then_good(tmp_path, {"IMM_TREES": str(request.param)})


@pytest.fixture
def after_tampering_in_slots(tmp_path: Path) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    return _run_bad_then_good(tmp_path, {"IMM_TREES": "checkouts"})


def test_the_next_lane_in_a_tampered_tree_sees_exactly_its_lane_base(
    after_tampering: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, out, _ = after_tampering
    report = json.loads((out / "good.json").read_text())
    assert report["after_bad"]
    assert report["cwd"] == (out / "bad.cwd").read_text()  # the same pooled tree
    assert report["differing"] == []


def test_the_next_lane_gets_a_repository_of_its_own_with_nothing_the_last_executor_set(
    after_tampering: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    repo, out, _ = after_tampering
    repository = json.loads((out / "good.json").read_text())["repository"]
    assert "fsmonitor" not in repository["config"]
    assert "hooksPath" not in repository["config"]
    assert repository["info"] == []
    assert repository["replace"] == []
    assert repository["alternates"] == [str((repo / ".git/objects").resolve())]
    assert not (out / "fsmonitor-ran").exists()


def test_only_the_next_lanes_own_change_lands_and_its_checks_see_a_clean_tree(
    after_tampering: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    repo, _, done = after_tampering
    assert done.returncode == 1, done.stderr  # `bad` needs a person
    children = {c.task_id: (str(c.state), c.reason) for c in current(repo).state.children}
    assert children["good"] == ("integrated", None)  # its tree check passed, lane and integrator
    assert children["bad"] == ("needs_human", "executor exited with 1")
    assert git(repo, "diff", "--name-only", "main", "imm/init").split() == ["good.txt"]


@pytest.mark.parametrize("trees", ["checkouts", "overlays"])
def test_a_slot_whose_index_an_executor_wrote_is_rebuilt_before_the_next_lane(
    tmp_path: Path, trees: str
) -> None:
    attack = {"IMM_TEST_INDEX_ATTACK": "1", "IMM_TREES": trees}
    repo, out, _ = _run_bad_then_good(tmp_path, attack)
    report = json.loads((out / "good.json").read_text())
    assert report["after_bad"]
    assert report["cwd"] == (out / "bad.cwd").read_text()
    assert report["differing"] == []  # config.txt too, which the forged index hid
    children = {c.task_id: str(c.state) for c in current(repo).state.children}
    assert children["good"] == "integrated"
    assert git(repo, "diff", "--name-only", "main", "imm/init").split() == ["good.txt"]


def test_no_executor_repository_or_prompt_is_left_in_the_pool_when_imm_run_returns(
    after_tampering_in_slots: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    repo, _, _ = after_tampering_in_slots
    slots = _pool_slots(repo)
    assert not [slot for slot in slots if (slot / "tree/.git").exists()]
    assert not [slot for slot in slots if (slot / "prompt.md").exists()]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_trees_held_by_a_sigkilled_run_are_taken_back_clean_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "sleep:30", "b": "sleep:30"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    monkeypatch.setenv("IMM_TREES", "checkouts")  # slots, not overlays (ADR 0055)
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    process = subprocess.Popen(
        imm_run_argv(repo),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    trees = repo / ".git/imm/trees"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(trees.glob("slot-*/tree/.git/HEAD"))) < 2:
        time.sleep(0.05)
    held = [path.parents[1] for path in trees.glob("slot-*/tree/.git/HEAD")]
    assert len(held) == 2
    for tree in held:  # what a lane killed half-way leaves: its change, a stale index lock
        (tree / "config.txt").write_text("half written\n")
        (tree / "stray.txt").write_text("left behind\n")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    (held[0].parent / "index.lock").write_text("")
    behaviour.write_text(json.dumps({}))
    rerun = subprocess.run(
        imm_run_argv(repo), check=False, capture_output=True, text=True, timeout=120
    )
    assert rerun.returncode == 0, rerun.stderr
    # the lanes of the rerun took the same trees and saw neither change: nothing outside scope
    assert git(repo, "diff", "--name-only", "main", "imm/init").split() == ["a.txt", "b.txt"]
    assert not [tree for tree in held if (tree / ".git").exists()]


def test_lane_folders_of_the_old_layout_left_by_a_dead_lane_are_removed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    repo = make_project(tmp_path / "r", {"a": []})
    left = repo / ".git/imm/lanes/batch-old/a+a0+p999999999+0123abcd"  # a pid no one has
    (left / "work").mkdir(parents=True)
    (left / "work/a.txt").write_text("old\n")
    done = subprocess.run(
        imm_run_argv(repo), check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not left.exists()


def test_a_lanes_check_sees_no_repository_and_the_next_attempt_finds_nothing_it_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import run_cli

    # attempt 1 writes "a" (the check fails, leaving junk.txt behind); attempt 2 writes "ok",
    # or "junk seen" if junk.txt reached it
    executor = shlex.join(["sh", "-c", (
        'if [ "$IMM_ATTEMPT" = 1 ]; then echo a > a.txt; '
        "elif [ -e junk.txt ]; then echo 'junk seen' > a.txt; else echo ok > a.txt; fi"
    )])  # fmt: skip
    check = descriptor([
        "-c",
        "import os, sys; open('junk.txt', 'w').write('x'); "
        "sys.exit(0 if open('a.txt').read() == 'ok\\n' and not os.path.exists('.git') else 1)",
    ])  # fmt: skip
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": check})
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    assert code == 0, (out, err)
    [child] = current(repo).state.children
    assert (child.state, child.qa_failures) == ("integrated", 1)
    assert git(repo, "show", "imm/init:a.txt") == "ok\n"


def test_an_ignored_file_the_executor_leaves_is_not_seen_by_its_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import run_cli

    executor = shlex.join(["sh", "-c", "echo a > a.txt; echo trace > debug.log"])
    check = descriptor(["-c", "import os, sys; sys.exit(1 if os.path.exists('debug.log') else 0)"])
    repo = make_project(
        tmp_path / "r",
        {"a": []},
        checks={"a": check},
        extra_files={"config.txt": "mode=ok\n", ".gitignore": "*.log\n"},
    )
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    assert code == 0, (out, err)
    assert [c.state for c in current(repo).state.children] == ["integrated"]


def test_a_small_repositorys_trees_leave_the_pool_when_imm_run_returns(
    after_tampering_in_slots: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    repo, _, _ = after_tampering_in_slots
    slots = _pool_slots(repo)
    assert not [slot for slot in slots if (slot / "tree").exists() or (slot / "index").exists()]


def test_nothing_of_an_overlay_is_left_when_imm_run_returns(tmp_path: Path) -> None:
    repo, _, done = _run_bad_then_good(tmp_path, {"IMM_TREES": "overlays"})
    assert "integrated good" in done.stderr
    pool = repo / ".git/imm/trees"
    assert not list(pool.glob("overlay-*"))
    assert not list(pool.glob("slot-*"))  # no whole checkout was made
    assert not memory_path(GitRepo(repo)).exists()  # the run's base, in memory, went too


def test_trees_of_as_many_files_as_the_threshold_stay_for_the_next_run(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    user = GitRepo(repo)
    with checked_out(user, "HEAD") as first, checked_out(user, "HEAD") as second:
        (first.root / ".git").mkdir()  # as a lane's executor repository would be
        files = len(git(repo, "ls-files").split())
        slots = [first.slot, second.slot]
    tidy_pool(user, keep_from_files=files)
    assert all((slot / "tree/config.txt").is_file() for slot in slots)
    assert not (slots[0] / "tree/.git").exists()
    tidy_pool(user, keep_from_files=files + 1)
    assert not [slot for slot in slots if (slot / "tree").exists()]
