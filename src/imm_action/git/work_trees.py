"""Trees on disk: a tree written into a folder from the object store, and git worktrees, whose
list is changed only under the repository's worktree lock."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from imm_action.git.ref_access import RefAccess
from imm_action.git.runner import GitRunner


class WorkTrees(RefAccess):
    # -- trees on disk ---------------------------------------------------------------------
    def materialise(self, tree: str, destination: Path) -> None:
        """Write the files of `tree` into `destination` from the object store (a private
        index, so neither the user's index nor any worktree is touched)."""
        destination.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="imm-index-") as scratch:
            env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
            self.git.run(["read-tree", tree], env=env)
            prefix = str(destination).rstrip("/") + "/"
            self.git.run(["checkout-index", "-a", "-f", f"--prefix={prefix}"], env=env)

    # -- worktrees (lanes) ----------------------------------------------------------------
    def add_worktree(self, path: Path, commit: str) -> None:
        """A detached worktree at `commit`: lanes never touch the user's checkout or branch."""
        with self._worktrees_locked() as admin:
            _drop_unfinished_worktrees(admin)
            self.git.run(["worktree", "prune"])
            self.git.run(["worktree", "add", "--quiet", "--detach", "--force", str(path), commit])

    def remove_worktree(self, path: Path) -> None:
        with self._worktrees_locked():
            self.git.run(["worktree", "remove", "--force", str(path)], ok_codes=(0, 128))

    @contextlib.contextmanager
    def _worktrees_locked(self) -> Iterator[Path]:
        """Hold the repository's worktree lock; yields `<common dir>/worktrees`.

        `git worktree add/remove/prune` are not safe against each other: a remove or prune
        deletes `.git/worktrees` when it empties it while an add is creating its entry there
        ("could not create directory of .git/worktrees/work"), and an add reads every other
        entry, dying on one that another add has only half written. Lanes run in parallel, so
        every change to the worktree list goes through this lock."""
        with self._flock("imm-worktrees.lock"):
            yield self.common_directory() / "worktrees"

    def snapshot_worktree(self, worktree: Path) -> tuple[str, str]:
        """Stage everything in a worktree (its own index; ignored files stay out) and return
        (tree id, HEAD commit) — the lane's work as it stands."""
        runner = GitRunner(worktree)
        runner.run(["add", "-A"])
        tree = runner.output(["write-tree"]).strip()
        head = runner.output(["rev-parse", "HEAD"]).strip()
        return tree, head


_WORKTREE_ENTRY_FILES = ("gitdir", "commondir", "HEAD")


def _drop_unfinished_worktrees(admin: Path) -> None:
    """Remove worktree entries that a killed `git worktree add` left half made (a file of the
    entry missing or empty, or still locked as "initializing"). Called under the worktree
    lock, so no add of ours is in progress: whatever is unfinished was abandoned. git itself
    neither prunes such an entry (it is locked) nor survives reading it."""
    if not admin.is_dir():
        return
    for entry in admin.iterdir():
        if not entry.is_dir():
            continue
        locked = entry / "locked"
        unfinished = any(
            not (entry / name).is_file() or (entry / name).stat().st_size == 0
            for name in _WORKTREE_ENTRY_FILES
        ) or (locked.is_file() and locked.read_text(errors="replace").startswith("initializing"))
        if unfinished:
            shutil.rmtree(entry, ignore_errors=True)
