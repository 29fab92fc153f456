"""Persistent trees for lanes and checks, moved from tree to tree by git (decisions 0024, 0028).

Writing a whole tree out costs tens of seconds on a big repository; moving a tree that is
already checked out to the next one writes only the files that differ (and the ones the last
user touched). Every lane and every check takes a slot from one pool under `.git/imm/trees`
(one `flock` each, so threads and processes never share one; a holder killed by SIGKILL frees
its slot with its death) and, holding it, moves the slot's tree to what it needs:

1. the slot's folders must be real folders (a link is removed), the tree holds no `.git`
   (a lane's executor had its repository there), the index must be a regular file;
2. `find` (in C, reading folders without a stat per file) removes every symlink, FIFO, socket
   and device in the tree: git never sees the last three, and its stat check looks *through* a
   link that replaced a folder and finds the files behind it unchanged (tracked links come
   back in the next step, a handful of files);
3. `clean -ffdx` removes every file the index does not know, ignored ones too (and fails if
   it cannot);
4. `read-tree --reset -u` moves the index to the tree asked for and writes again every file
   that tree changes and every tracked file whose stat data (ctime and inode included, whatever
   the user configured; racy entries by content) no longer matches the index — one pass over
   the files, where `diff-files`, `checkout-index` and `read-tree -m` took two.

Any step failing, the slot is rebuilt from nothing.

So whoever takes a slot sees a complete, clean tree of exactly what it asked for, whatever the
last holder — an executor, a check — did inside it. The slot's index lies beside the tree, in
reach of what runs there: while untrusted code runs, `untrusted()` watches the index's stat
(its ctime cannot be set back), and a slot whose index was written is rebuilt from nothing
before anyone takes it again. Files changed outside `writable_paths` come from `diff-files`
(git's own stat data, in C), never from walking the tree in Python.

The pool stays between runs when its trees are big (`tidy_pool` drops what executors left beside
the trees): a new slot costs one whole checkout, which a batch on a big repository must not pay
per lane. A small repository's trees go at the end of the run (decision 0030).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from imm_action.git.errors import GitError
from imm_action.git.repo import GitRepo
from imm_action.sandbox.confine import Bind

MAX_SLOTS = 64
# A tree of fewer files is written out in well under a second: not worth keeping between runs.
KEEP_TREES_FROM_FILES = 10_000
# A whole checkout of a big repository on a slow disk takes minutes, not the default 2.
_CHECKOUT_TIMEOUT_S = 3600.0
# Stat data must catch every change: compare ctime, inode and all, whatever the user set.
_STAT_CONFIG = ("-c", "core.checkStat=default", "-c", "core.trustctime=true")
PROMPT_FILE = "prompt.md"  # a lane's prompt, beside its tree
LANE_HOME = "home"  # an executor's own home in the sandbox, beside its tree
_ASIDE = "lane.git"  # where a lane's repository waits while checks run in its tree

_Stamp = tuple[int, int, int, int, int] | None


@dataclass
class CheckoutTree:
    """A slot checked out at one tree: the files, and what a check changed in them."""

    root: Path
    index: Path
    repo: GitRepo
    slot: Path
    tainted: bool = False  # untrusted code wrote the index: rebuild before the next use
    # Open to other users (an isolated check's pool, ADR 0031): folders 0777 and files 0666 as
    # git writes them, so that the check user may write its tree without a change of owner
    # (which would touch every file's ctime and so make git write the whole tree again).
    shared: bool = False

    def _git(self, args: list[str], stdin: str | None = None) -> str:
        return self.repo.git.run(
            [*_STAT_CONFIG, f"--work-tree={self.root}", *args],
            input_text=stdin,
            env={"GIT_INDEX_FILE": str(self.index)},
            timeout_s=_CHECKOUT_TIMEOUT_S,
            umask=0 if self.shared else -1,
        ).stdout

    def mount(self, target: str) -> Bind:
        """The tree seen writable at `target` in the sandbox (an overlay's has layers)."""
        return Bind(self.root, target, writable=True)

    def changed(self, writable: tuple[str, ...]) -> list[str]:
        """Tracked files modified, removed or re-typed since the checkout, outside `writable`
        (new files, such as caches, are not changes to the tree under test)."""
        excluded = [f":(exclude,literal){folder.strip('/')}" for folder in writable if folder]
        listing = self._git(["diff-files", "--name-only", "-z", "--", ".", *excluded])
        return sorted(path for path in listing.split("\0") if path)

    def untracked(self) -> list[str]:
        """Paths of the tree git does not track, ignored ones too (a folder named once)."""
        listing = self._git(["ls-files", "-o", "-z", "--directory"])
        return [path for path in listing.split("\0") if path]

    def drop_lane(self) -> None:
        """What a lane leaves beside the files: its executor's repository (in the tree, or set
        aside by `lent` when the lane was killed during its checks) and its prompt."""
        remove_tree(self.root / ".git")
        remove_tree(self.slot / _ASIDE)
        remove_tree(self.slot / PROMPT_FILE)
        remove_tree(self.slot / LANE_HOME)

    @contextlib.contextmanager
    def lent(self) -> Iterator[CheckoutTree | None]:
        """This tree itself to check what its index holds, when nothing else lies in it (a
        lane's snapshot was just written, and the executor left no ignored file, FIFO or
        socket): saves moving another slot. The lane's repository is set aside meanwhile.
        None when something else lies in the tree: the checks take a slot of the pool."""
        if self._git(["ls-files", "-o", "-z", "--directory"]) or _special_files(self.root):
            yield None
            return
        git_dir, aside = self.root / ".git", self.slot / _ASIDE
        remove_tree(aside)
        moved = os.path.lexists(git_dir)
        if moved:
            os.rename(git_dir, aside)
        try:
            yield self
        finally:
            remove_tree(git_dir)  # one a check made
            if moved:
                os.rename(aside, git_dir)

    def restore(self, tree: str) -> None:
        """Back to exactly `tree` after checks ran here (for the executor's next attempt)."""
        if self.tainted:
            _discard(self)
        move_slot(self.repo, self.slot, tree)

    def fresh_view(self, tree: str) -> None:
        """Between two checks of one tree: what the first wrote — untracked files included —
        gone before the next runs (issue 42 #1): clean, then the stat-based move back."""
        self.restore(tree)

    @contextlib.contextmanager
    def untrusted(self) -> Iterator[None]:
        """While code imm does not trust runs in the tree: a write of the index (which lies in
        its reach, beside the tree) taints the slot."""
        before = _stamp(self.index)
        try:
            yield
        finally:
            if _stamp(self.index) != before:
                self.tainted = True


def pool_folder(repo: GitRepo) -> Path:
    """`<git common dir>/imm/trees`: one pool per repository, gone with it."""
    folder = repo.common_directory() / "imm" / "trees"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def checked_out(repo: GitRepo, tree: str, pool: Path | None = None) -> Iterator[CheckoutTree]:
    """A free slot (made on first use) checked out at `tree` (a tree or commit), complete and
    clean, held until the block ends. `pool`: another pool than the repository's (isolated
    checks take theirs where their user can reach it: its slots are passable to others)."""
    folder = pool_folder(repo) if pool is None else pool
    for number in range(MAX_SLOTS):
        slot = folder / f"slot-{number}"
        _real_folder(slot)
        if pool is not None:
            os.chmod(slot, 0o711)  # passable to the check user; the index in it stays imm's
        lock = os.open(slot / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        try:
            checkout = move_slot(repo, slot, tree, shared=pool is not None)
            try:
                yield checkout
            finally:
                if checkout.tainted:
                    _discard(checkout)
        finally:
            os.close(lock)  # closing releases the lock
        return
    raise GitError(["tree pool"], None, f"all {MAX_SLOTS} trees are busy")


def move_slot(repo: GitRepo, slot: Path, tree: str, *, shared: bool = False) -> CheckoutTree:
    """The slot's tree moved to `tree` (the module's steps), or made afresh."""
    checkout = CheckoutTree(slot / "tree", slot / "index", repo, slot, shared=shared)
    # A process killed while moving this slot leaves its index lock behind; holding the slot's
    # flock, we are the only user of that index.
    (slot / "index.lock").unlink(missing_ok=True)
    try:
        _take_back(checkout)
        _sweep(checkout.root)
        checkout._git(["clean", "-ffdxq"])
        # One pass over the files: the index moves to `tree`, and every file that is not what
        # the index says (by git's stat check: ctime and inode too; racy ones by content) or
        # that `tree` changes is written again.
        checkout._git(["read-tree", "--reset", "-u", tree])
        return checkout
    except (GitError, OSError, subprocess.SubprocessError):
        pass
    # Whatever the last holder left that git cannot take back: start this slot afresh.
    _discard(checkout)
    _reset(checkout, tree)
    return checkout


def _take_back(checkout: CheckoutTree) -> None:
    """The slot's parts as imm made them: real folders, no repository in the tree, an index
    that is a regular file."""
    _real_folder(checkout.root)
    if checkout.shared:
        os.chmod(checkout.root, 0o777)
    remove_tree(checkout.root / ".git")
    try:
        mode = os.lstat(checkout.index).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        remove_tree(checkout.index)


def _reset(checkout: CheckoutTree, tree: str) -> None:
    checkout._git(["read-tree", "--reset", "-u", tree])


# FIFOs, sockets and devices, as a `find` expression
_SPECIAL_TYPES = ("-type", "p", "-o", "-type", "s", "-o", "-type", "b", "-o", "-type", "c")


def _find(root: Path, *expression: str) -> bytes:
    """`find root -xdev expression…`'s output. It runs in the tree it searches: `find` goes back
    to the folder it started in when done, and fails where imm's working folder is one imm's
    user cannot enter (imm started as another user from a folder only its owner enters:
    test_sandbox_sudo.py run from a `mktemp -d` clone)."""
    return subprocess.run(
        ["find", str(root), "-xdev", *expression],
        check=True, capture_output=True, timeout=_CHECKOUT_TIMEOUT_S, cwd=root,
    ).stdout  # fmt: skip


def _sweep(root: Path) -> None:
    """Every symlink, FIFO, socket and device under `root` removed (see the module's step 2)."""
    _find(root, "(", "-type", "l", "-o", *_SPECIAL_TYPES, ")", "-delete")


def _special_files(root: Path) -> bool:
    """Whether a FIFO, socket or device lies in the tree (outside `.git`)."""
    git_folder = str(root / ".git")
    return bool(_find(root, "-path", git_folder, "-prune", "-o", "(", *_SPECIAL_TYPES, ")",
                      "-print", "-quit"))  # fmt: skip


def _discard(checkout: CheckoutTree) -> None:
    remove_tree(checkout.root)
    remove_tree(checkout.index)
    checkout.root.mkdir(mode=0o700)
    if checkout.shared:
        os.chmod(checkout.root, 0o777)
    checkout.tainted = False


def _real_folder(path: Path) -> None:
    """`path` a folder of its own: a link (or file) in its place is removed first."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        path.mkdir(mode=0o700, exist_ok=True)
        return
    if not stat.S_ISDIR(mode):
        path.unlink(missing_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)


def _stamp(path: Path) -> _Stamp:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def remove_tree(path: Path) -> None:
    """rm -rf, also of what someone made read-only; a link is removed, never followed."""

    def writable_again(function: object, name: str, _error: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            if not os.path.islink(name):
                os.chmod(name, 0o700)
        with contextlib.suppress(OSError):
            if os.path.isdir(name) and not os.path.islink(name):
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, onerror=writable_again)
    else:
        path.unlink()


def tidy_pool(repo: GitRepo, keep_from_files: int | None = None) -> None:
    """At the end of a run: what executors left beside the free slots' trees (their
    repositories, prompts) goes. The trees stay for the next run when writing one out is
    expensive — an index of `keep_from_files` entries or more (decision 0030) — and go with
    their slot otherwise: a small repository's tree is checked out again in milliseconds, and
    a pool of ten of them would only fill `.git`."""
    threshold = KEEP_TREES_FROM_FILES if keep_from_files is None else keep_from_files
    folder = pool_folder(repo)
    for slot in sorted(folder.glob("slot-*")):
        if slot.is_symlink() or not slot.is_dir():
            remove_tree(slot)
            continue
        with free_to_take(slot / "lock") as free:
            if free:
                with contextlib.suppress(OSError):
                    checkout = CheckoutTree(slot / "tree", slot / "index", repo, slot)
                    _real_folder(checkout.root)
                    checkout.drop_lane()
                    if index_entries(checkout.index) < threshold:
                        remove_tree(checkout.root)
                        remove_tree(checkout.index)


@contextlib.contextmanager
def free_to_take(lock_path: Path) -> Iterator[bool]:
    """Whether nobody held the lock file at `lock_path`: then it is held exclusively through
    the block."""
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(lock)


def index_entries(index: Path) -> int:
    """The number of entries a git index holds (its header: `DIRC`, version, count); 0 for
    anything that is no index."""
    try:
        fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    with os.fdopen(fd, "rb") as handle:
        header = handle.read(12)
    if len(header) < 12 or header[:4] != b"DIRC":
        return 0
    return int.from_bytes(header[8:12], "big")
