"""A lane's change as the rules of plan/lane_change.py see it: each changed path with its new
mode, and a symlink's target (read from the object store, never from a work tree)."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.git.repo import GitRepo
from imm_action.plan.lane_change import GONE_MODE, LINK_MODE, ChangedEntry

MAX_LINK_TARGET = 4096


def changed_entries(repo: GitRepo, start: str, end: str) -> list[ChangedEntry]:
    """The entries changed from `start` to `end` (commits or trees), each saying whether it
    adds a file `start` did not hold."""
    entries = []
    added: set[str] = set()
    for path, value in sorted(repo.tree_change(start, end, added).items()):
        mode, blob = value.split(" ", 1)
        target = None
        if mode == LINK_MODE:
            target = _blob_text(repo, blob)[:MAX_LINK_TARGET]
        entries.append(ChangedEntry(path, mode, target, added=path in added))
    return entries


def tree_links(repo: GitRepo, commit: str, change: Sequence[ChangedEntry]) -> dict[str, str] | None:
    """Every link of `commit`'s tree (path -> target) when `change` adds, changes or may remove
    a link (a removed path's old mode is unknown here), else None: only then can the way the
    tree's links resolve have changed."""
    if not any(entry.mode in (LINK_MODE, GONE_MODE) for entry in change):
        return None
    links = {p: e.oid for p, e in repo.tree_entries(commit, [], recursive=True).items()
             if e.mode == LINK_MODE}  # fmt: skip
    blobs = repo.read_blobs(links.values())
    return {
        path: blobs.get(oid, b"").decode("utf-8", "surrogateescape")[:MAX_LINK_TARGET]
        for path, oid in links.items()
    }


def _blob_text(repo: GitRepo, blob: str) -> str:
    data = repo.read_blobs([blob]).get(blob, b"")
    return data.decode("utf-8", "surrogateescape")
