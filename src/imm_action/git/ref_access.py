"""A repository's refs: read, named, and moved all at once or not at all under imm's ref lock,
which also clears what killed writers of ours left behind."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from imm_action.git.errors import GitConflict
from imm_action.git.ref_files import list_ref_files, read_head_branch, read_ref_files
from imm_action.git.runner import IMM_GIT_MARK
from imm_action.git.writing import ObjectWriting

ZERO_OID = "0" * 40


# Where imm's refs live (batch branches, lane branches, batch state and outcomes, the mirror of
# a remote's): only imm writes there, always under the ref lock.
IMM_REF_NAMESPACES = ("refs/heads/imm", "refs/heads/imm-lane", "refs/imm", "refs/imm-mirror")


@dataclass(frozen=True)
class RefUpdate:
    """Move `ref` from `old` to `new`; None for `old` means "must not exist", for `new` "delete"."""

    ref: str
    new: str | None
    old: str | None


class RefAccess(ObjectWriting):
    def list_refs(self, prefix: str) -> dict[str, str]:
        """Every ref under `prefix` (a folder like `refs/imm/batches/`) with its object id."""
        direct = list_ref_files(self.common_directory(), prefix)
        if direct is not None:
            return direct
        listing = self.git.output(["for-each-ref", "--format=%(objectname) %(refname)", prefix])
        refs = {}
        for line in listing.splitlines():
            oid, name = line.split(" ", 1)
            refs[name] = oid
        return refs

    def read_refs(self, names: Iterable[str]) -> dict[str, str | None]:
        wanted = list(names)
        found: dict[str, str | None] = dict.fromkeys(wanted)
        if not wanted:
            return found
        # the files themselves where git keeps them plainly (ref_files.py), else git
        direct = read_ref_files(self.common_directory(), wanted)
        if direct is not None:
            return direct
        listing = self.git.output(["for-each-ref", "--format=%(objectname) %(refname)", *wanted])
        for line in listing.splitlines():
            oid, name = line.split(" ", 1)
            if name in found:
                found[name] = oid
        return found

    def current_branch(self) -> str | None:
        """The branch HEAD is on (`main`, not `refs/heads/main`); None when HEAD is detached."""
        full = read_head_branch(self.git_directory(), self.common_directory())
        if full is not None:
            return full.removeprefix("refs/heads/")
        found = self.git.run(["symbolic-ref", "--short", "-q", "HEAD"], ok_codes=(0, 1))
        return found.stdout.strip() or None

    def branch_head(self, branch: str) -> str | None:
        """The commit `refs/heads/<branch>` points to, else the commit `branch` names."""
        full = f"refs/heads/{branch}"
        found = self.read_refs([full])[full]
        if found is not None and self.commit_if_present(found) is not None:
            return found
        return self.resolve(full) or self.resolve(branch)

    def can_name(self, ref: str) -> bool:
        """Whether git accepts `ref` as a full ref name (`git check-ref-format`)."""
        return self.git.run(["check-ref-format", ref], ok_codes=(0, 1)).exit_code == 0

    # -- refs ----------------------------------------------------------------------------
    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        """Move every ref at once or none: one `update-ref --stdin` transaction. A ref not at
        its expected old value makes the whole transaction fail with GitConflict.

        git's files backend commits a transaction by renaming one lock file after the other,
        so a process killed in that phase leaves the refs after it unmoved, with their `.lock`
        files behind — which git never removes and which make every later update of that ref
        fail. Our writers therefore hold the repository's ref lock, under which a `.lock` in
        imm's namespaces can only be the debris of a killed writer and is cleared; callers
        order their updates so that a prefix of them is a state a pass can recover from."""
        with self.refs_locked():
            self._compare_and_swap(updates)

    def _compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        lines = ["start"]
        for update in updates:
            old = update.old or ZERO_OID
            if update.new is None:
                lines.append(f"delete {update.ref} {old}")
            else:
                lines.append(f"update {update.ref} {update.new} {old}")
        lines += ["prepare", "commit", ""]
        result = self.git.run(
            ["update-ref", "--stdin"], input_text="\n".join(lines), ok_codes=(0, 1, 128)
        )
        if result.exit_code != 0:
            raise GitConflict(["update-ref", "--stdin"], result.exit_code, result.stderr)

    @contextlib.contextmanager
    def refs_locked(self) -> Iterator[None]:
        """Hold the repository's ref lock (all of imm's ref writers take it) and clear lock
        files that killed writers of ours left: any in imm's namespaces, and `packed-refs.lock`
        when it was made while a writer of ours that never finished held this lock.

        git locks `packed-refs` for every transaction that deletes a ref (integration deletes
        the lane's refs), so a writer killed in that moment leaves `packed-refs.lock`, and every
        later deletion fails as a lost race, for good. That file is shared with the user's own
        git: the lock file itself records since when a writer of ours is at work (cleared when
        it is done), and only a `packed-refs.lock` no older than that is taken for its debris."""
        common = self.common_directory()
        with self._flock("imm-refs.lock") as lock:
            for namespace in IMM_REF_NAMESPACES:
                _drop_stale_ref_locks(common / namespace)
            lock.seek(0)
            _drop_stale_packed_refs_lock(common, lock.read())
            _mark_writer(lock, f"{time.time():.3f}\n".encode())
            try:
                yield
            except GitConflict:
                _mark_writer(lock, b"")  # git ended on its own: its locks went with it
                raise
            # Done. Killed, or failed otherwise (a git killed on a timeout, Ctrl-C), the mark
            # stays, and the next writer looks for what was left.
            _mark_writer(lock, b"")

    @contextlib.contextmanager
    def _flock(self, name: str) -> Iterator[BinaryIO]:
        """An exclusive flock on `<common dir>/<name>`; yields the lock file, open. An flock
        dies with its process, so a writer killed with SIGKILL never leaves it held."""
        with open(self.common_directory() / name, "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield lock
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _mark_writer(lock: BinaryIO, mark: bytes) -> None:
    lock.seek(0)
    lock.truncate()
    lock.write(mark)
    lock.flush()


# How long a writer of ours may hold the ref lock at the most: a local ref transaction takes
# milliseconds. A `packed-refs.lock` made later than this after a killed writer began is not its.
WRITER_SECONDS = 60.0


def _drop_stale_packed_refs_lock(common: Path, mark: bytes) -> None:
    """`mark`: what the ref lock file held when taken; a time when a writer of ours that was
    killed began. A `packed-refs.lock` is that writer's debris only when it was made while that
    writer could have been at work (from its start to WRITER_SECONDS later) and no other git is
    at work in the repository (git closes the lock file as soon as it holds it, so the file
    itself does not say whether its git lives). Anything else belongs to someone else's git,
    and stays: the transaction then fails as a lost race, and the pass that gives up names the
    file (issue 28 #7)."""
    try:
        began = float(mark.decode().strip())
    except ValueError:
        return  # no writer of ours died at work
    packed = common / "packed-refs.lock"
    with contextlib.suppress(FileNotFoundError):
        made = packed.stat().st_mtime
        # mtimes are whole seconds on some file systems: a second's leeway
        if began - 1.0 <= made <= began + WRITER_SECONDS and not _git_at_work(common):
            packed.unlink()


def _git_at_work(common: Path) -> bool:
    """Whether a git that is not imm's (it lacks the mark every git imm runs carries) works
    in the repository: its folder is inside the repository's work tree or git directory,
    lanes' trees (under `<git dir>/imm`) aside. Processes of other users, which this one may
    not look into, are not asked: the user's git runs as the user."""
    root = common.parent if common.name == ".git" else common
    places = (str(root.resolve()), str(common.resolve()))
    ours = str((common / "imm").resolve())
    mark = f"\0{IMM_GIT_MARK}=1\0".encode()
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if (process / "comm").read_text().strip() != "git":
                continue
            folder = os.readlink(process / "cwd")
            environment = b"\0" + (process / "environ").read_bytes()
        except OSError:
            continue  # ended meanwhile, or another user's
        inside = any(folder == place or folder.startswith(place + "/") for place in places)
        in_a_lane = folder == ours or folder.startswith(ours + "/")
        if inside and not in_a_lane and mark not in environment:
            return True
    return False


def _drop_stale_ref_locks(directory: Path) -> None:
    """Remove `<ref>.lock` files under `directory` (called under the ref lock: no writer of
    ours is running, so each one was left by a writer that was killed)."""
    if not directory.is_dir():
        return
    for lock in directory.rglob("*.lock"):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
