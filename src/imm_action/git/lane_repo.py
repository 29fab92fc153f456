"""A lane's own repository (SPEC §5.1; decisions 0013, 0028).

An executor works in a pooled tree (verify/trees.py) that imm moved to the lane base, with a
repository of its own written into it (`.git`, whose only link to the user's is an alternates
entry: it reads the user's objects, it cannot touch the user's refs, config or hooks). imm never
runs git with that repository's config: it snapshots the files through the *user's* git
directory with the slot's index and the tree as work tree, and reads the executor's HEAD by
hand. So whatever the executor writes into `.git` — refs, config (`core.fsmonitor`, hooks,
filters), packed objects — is never read by a git process of imm's, the repository is made
afresh for every lane, and the one thing imm takes back is the tree it snapshots, committed by
imm itself.

    <slot>/tree/        the executor's checkout; tree/.git its repository
    <slot>/index        imm's index of tree/ (stat data kept, so a snapshot hashes only what
                        changed, and the next holder of the slot moves only what differs)
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from imm_action.git.repo import CommitInfo, GitRepo
from imm_action.git.runner import GitRunner

_OID = re.compile(r"[0-9a-f]{40}")
_MAX_REF_FILE = 4096
_MAX_PACKED_REFS = 1 << 20


@dataclass(frozen=True)
class LaneRepository:
    """The executor's repository in a pooled tree, seen from the user's repository."""

    user: GitRepo
    work: Path
    index: Path
    # an overlay tree (verify/overlays.py): where `.git` is written (its upper folder, so the
    # executor sees it in its tree), what imm's git runs in to see the merged files, and the
    # paths the executor wrote or removed (None: let `add -A` look at every file)
    upper: Path | None = None
    wrapper: tuple[str, ...] = ()
    written: Callable[[], list[str] | None] | None = None

    @property
    def git_dir(self) -> Path:
        return (self.upper or self.work) / ".git"

    def _through_user(self) -> GitRunner:
        """git in the user's repository (its config, which the executor cannot write) with
        the tree as work tree and the slot's index."""
        return GitRunner(
            self.work,
            wrapper=self.wrapper,
            env={
                "GIT_DIR": str(self.user.git_directory()),
                "GIT_WORK_TREE": str(self.work),
                "GIT_INDEX_FILE": str(self.index),
                "GIT_CONFIG_COUNT": "3",
                "GIT_CONFIG_KEY_0": "core.fsmonitor",
                "GIT_CONFIG_VALUE_0": "false",
                # every change the executor made shows in the stat data
                "GIT_CONFIG_KEY_1": "core.checkStat",
                "GIT_CONFIG_VALUE_1": "default",
                "GIT_CONFIG_KEY_2": "core.trustctime",
                "GIT_CONFIG_VALUE_2": "true",
            },
        )

    def create(self, base: str, branch: str) -> None:
        """A repository of the executor's in the tree, which imm moved to `base`, on
        `branch`."""
        # Written by hand: `git init` would read templates and config from places we do not
        # control, and nothing here needs a git process.
        git_dir = self.git_dir
        for folder in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (git_dir / folder).mkdir(parents=True)
        objects = self.user.objects_directory()
        (git_dir / "objects/info/alternates").write_text(f"{objects}\n", encoding="utf-8")
        (git_dir / "HEAD").write_text(f"ref: refs/heads/{branch}\n", encoding="utf-8")
        ref = git_dir / "refs/heads" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(f"{base}\n", encoding="utf-8")
        (git_dir / "config").write_text(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
            encoding="utf-8",
        )
        # The executor sees a clean checkout: its index is ours (same files, same stat data).
        shutil.copyfile(self.index, git_dir / "index")

    def snapshot(self) -> str:
        """The tree of the files as they stand (ignored files stay out), written into the user's
        object store by imm."""
        runner = self._through_user()
        paths = None if self.written is None else self.written()
        if paths is None:
            runner.run(["add", "-A"])
        elif paths:
            # only what the executor wrote: the other files' stat is not even read; a path git
            # ignores (and does not track) stays out, as `add -A` leaves it
            literal = {"GIT_LITERAL_PATHSPECS": "1"}
            ignored = runner.run(
                ["check-ignore", "-z", "--stdin"], input_text="\0".join(paths), ok_codes=(0, 1)
            ).stdout.split("\0")
            kept = sorted(set(paths) - set(ignored))
            if kept:
                runner.run(["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
                           input_text="\0".join(kept), env=literal)  # fmt: skip
        return runner.output(["write-tree"]).strip()

    def executor_head(self) -> str | None:
        """The commit the executor's HEAD names, read from files (never through its config);
        None when it names none we can read."""
        try:
            head = _read_small(self.git_dir / "HEAD").strip()
        except OSError:
            return None
        if _OID.fullmatch(head):
            return head
        if not head.startswith("ref: refs/"):
            return None
        name = head[5:]
        if ".." in name.split("/") or "\0" in name:
            return None
        try:
            value = _read_small(self.git_dir / name).strip()
        except OSError:
            value = _packed_ref(self.git_dir, name) or ""
        return value if _OID.fullmatch(value) else None

    def executor_commit(self, oid: str) -> CommitInfo | None:
        """A commit of the executor's, read through the user's repository with the lane's
        objects added (reading an object runs nothing)."""
        objects = self.git_dir / "objects"
        reader = GitRepo(
            self.user.path,
            GitRunner(
                self.user.path,
                env={
                    "GIT_OBJECT_DIRECTORY": str(objects),
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.user.objects_directory()),
                },
            ),
        )
        try:
            return reader.commit(oid)
        except Exception:  # an unreadable commit of the executor's: as if it had not committed
            return None
        finally:
            reader.close()


def _read_small(path: Path) -> str:
    """A ref file, refusing links, devices and anything large (the executor made it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read(_MAX_REF_FILE).decode("utf-8", "replace")


def _packed_ref(git_dir: Path, name: str) -> str | None:
    try:
        fd = os.open(git_dir / "packed-refs", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = handle.read(_MAX_PACKED_REFS).decode("utf-8", "replace")
    for line in text.splitlines():
        oid, _, ref = line.partition(" ")
        if ref == name:
            return oid
    return None
