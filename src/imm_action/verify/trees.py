"""Persistent trees to run checks in, moved from tree to tree with `read-tree --reset -u`.

Writing a whole tree out for every check costs seconds on a big repository; moving a tree that
is already checked out to the next one writes only the files that differ (and the ones the last
check touched), then `git clean -ffdx` removes everything the index does not know. A check
therefore still sees a complete, clean tree. Each slot has its own index, so git's own stat
data tells which tracked files a check changed (`diff-files`) without walking the tree in
Python. Slots live in `.git/imm/trees`, one lock file each (`flock`), so threads and processes
(the integrator and its lanes) never share one; `imm run` removes them when it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from imm_action.git.errors import GitError
from imm_action.git.repo import GitRepo

MAX_SLOTS = 64


@dataclass(frozen=True)
class CheckoutTree:
    """A slot checked out at one tree: the files, and what a check changed in them."""

    root: Path
    index: Path
    repo: GitRepo

    def changed(self, writable: tuple[str, ...]) -> list[str]:
        """Tracked files modified, removed or re-typed since the checkout, outside `writable`
        (new files, such as caches, are not changes to the tree under test)."""
        excluded = [f":(exclude,literal){folder.strip('/')}" for folder in writable if folder]
        listing = self.repo.git.output(
            [f"--work-tree={self.root}", "diff-files", "--name-only", "-z", "--", ".", *excluded],
            env={"GIT_INDEX_FILE": str(self.index)},
        )
        return sorted(path for path in listing.split("\0") if path)


def pool_folder(repo: GitRepo) -> Path:
    """`<git common dir>/imm/trees`: one pool per repository, gone with it."""
    common = repo.git.output(["rev-parse", "--path-format=absolute", "--git-common-dir"]).strip()
    folder = Path(common) / "imm" / "trees"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def checked_out(repo: GitRepo, tree: str) -> Iterator[CheckoutTree]:
    """A free slot (made on first use) checked out at `tree`, held until the block ends."""
    folder = pool_folder(repo)
    for number in range(MAX_SLOTS):
        slot = folder / f"slot-{number}"
        slot.mkdir(mode=0o700, exist_ok=True)
        lock = os.open(slot / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        try:
            yield _move(repo, slot, tree)
        finally:
            os.close(lock)  # closing releases the lock
        return
    raise GitError(["tree pool"], None, f"all {MAX_SLOTS} check trees are busy")


def _move(repo: GitRepo, slot: Path, tree: str) -> CheckoutTree:
    checkout = CheckoutTree(slot / "tree", slot / "index", repo)
    env = {"GIT_INDEX_FILE": str(checkout.index)}
    work = f"--work-tree={checkout.root}"
    # A process killed while moving this slot leaves its index lock behind; holding the slot's
    # flock, we are the only user of that index.
    (slot / "index.lock").unlink(missing_ok=True)
    try:
        checkout.root.mkdir(exist_ok=True)
        repo.git.run([work, "read-tree", "--reset", "-u", tree], env=env)
        repo.git.run([work, "clean", "-ffdxq"], env=env)
    except (GitError, OSError):
        # Whatever a check left behind that git cannot take back: start this slot afresh.
        _remove(slot / "tree")
        checkout.index.unlink(missing_ok=True)
        checkout.root.mkdir()
        repo.git.run([work, "read-tree", "--reset", "-u", tree], env=env)
    return checkout


def _remove(path: Path) -> None:
    def writable_again(function: object, name: str, _error: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
        with contextlib.suppress(OSError):
            if os.path.isdir(name) and not os.path.islink(name):
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    shutil.rmtree(path, onerror=writable_again)


def remove_pool(repo: GitRepo) -> None:
    """Drop the slots no one holds (at the end of a run)."""
    folder = pool_folder(repo)
    for slot in sorted(folder.glob("slot-*")):
        lock = os.open(slot / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        else:
            _remove(slot / "tree")
            (slot / "index").unlink(missing_ok=True)
        finally:
            os.close(lock)
