"""Git operations the integrator needs, on one repository, through `GitRunner`: `GitRepo`, made
of its parts — the object reader's types (`objects.py`), what every part shares
(`repo_base.py`), reading objects (`reading.py`), writing them (`writing.py`), refs
(`ref_access.py`) and trees on disk (`work_trees.py`). A caller needing only a type imports it
from its part; the names below stay importable from here."""

from __future__ import annotations

from imm_action.git.objects import (
    FOLDER_MODE,
    GONE_MODE,
    IMM_IDENTITY,
    ChangeIdentity,
    CommitInfo,
    Identity,
    MergeResult,
    TreeEntry,
)
from imm_action.git.ref_access import IMM_REF_NAMESPACES, WRITER_SECONDS, ZERO_OID, RefUpdate
from imm_action.git.work_trees import WorkTrees

__all__ = [
    "FOLDER_MODE", "GONE_MODE", "IMM_IDENTITY", "IMM_REF_NAMESPACES", "WRITER_SECONDS",
    "ZERO_OID", "ChangeIdentity", "CommitInfo", "GitRepo", "Identity", "MergeResult",
    "RefUpdate", "TreeEntry",
]  # fmt: skip


class GitRepo(WorkTrees):
    def forked(self) -> GitRepo:
        """This repository for a process forked from ours: what was found about it (its git
        directory, object store) and the objects read so far, but its own object reader — a
        `cat-file` process serves the process that started it only."""
        copy = GitRepo(self.path, self.git)
        copy._layout = self._layout
        # facts about immutable objects: shared, not copied (a fork has its own memory anyway)
        copy._ancestry = self._ancestry
        copy._commits = self._commits
        copy._folders = self._folders
        copy._trees = self._trees
        return copy

    def configured_identity(self) -> Identity | None:
        """The user's `user.name` and `user.email` as this repository's git sees them; None
        when either is unset."""
        # both keys in one git process; as `--get` would, the last value of a key counts
        asked = ["config", "-z", "--get-regexp", r"^user\.(name|email)$"]
        found: dict[str, str] = {}
        for entry in self.git.run(asked, ok_codes=(0, 1)).stdout.split("\0"):
            key, _, value = entry.partition("\n")
            found[key] = value.strip()
        name, email = found.get("user.name", ""), found.get("user.email", "")
        return Identity(name, email) if name and email else None
