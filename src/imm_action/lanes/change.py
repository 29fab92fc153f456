"""A lane's change as the rules of plan/lane_change.py see it: each changed path with its new
mode, and a symlink's target (read from the object store, never from a work tree)."""

from __future__ import annotations

from imm_action.git.repo import GitRepo
from imm_action.plan.lane_change import LINK_MODE, ChangedEntry

MAX_LINK_TARGET = 4096


def changed_entries(repo: GitRepo, start: str, end: str) -> list[ChangedEntry]:
    """The entries changed from `start` to `end` (commits or trees)."""
    entries = []
    for path, value in sorted(repo.tree_change(start, end).items()):
        mode, blob = value.split(" ", 1)
        target = None
        if mode == LINK_MODE:
            target = _blob_text(repo, blob)[:MAX_LINK_TARGET]
        entries.append(ChangedEntry(path, mode, target))
    return entries


def _blob_text(repo: GitRepo, blob: str) -> str:
    data = repo.read_blobs([blob]).get(blob, b"")
    return data.decode("utf-8", "surrogateescape")
