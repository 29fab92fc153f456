"""Writing an overlay's layer (decision 0055): the files a tree differs in from the base, from
git's objects, a removed path a whiteout (the 0/0 character device overlayfs reads as such)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from imm_action.git.repo import GONE_MODE, GitRepo
from imm_action.verify.trees import (
    remove_tree,
)

LINK_MODE = "120000"
GITLINK_MODE = "160000"


def write_layer(repo: GitRepo, change: Mapping[str, str], layer: Path) -> None:
    """`change` (`GitRepo.tree_change`: path -> "mode oid", or gone) as files under `layer`:
    written from the objects, a removed path a whiteout, a path that became a folder a folder
    over it."""
    removed = sorted(path for path, value in change.items() if value.startswith(GONE_MODE))
    written = sorted(path for path, value in change.items() if not value.startswith(GONE_MODE))
    for path in removed:
        target = layer / path
        if _under_non_folder(layer, path):
            continue  # a folder that became a file: the file hides all below
        target.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(target):
            whiteout(target)
    blobs = repo.read_blobs(change[path].split(" ", 1)[1] for path in written)
    for path in written:
        mode, oid = change[path].split(" ", 1)
        target = layer / path
        _make_parents(layer, path)
        remove_tree(target)  # a whiteout or folder left by the removals above
        if mode == GITLINK_MODE:
            target.mkdir()
        elif mode == LINK_MODE:
            os.symlink(blobs.get(oid, b"").decode("utf-8", "surrogateescape"), target)
        else:
            target.write_bytes(blobs.get(oid, b""))
            os.chmod(target, 0o755 if mode == "100755" else 0o644)


def _under_non_folder(layer: Path, path: str) -> bool:
    parts = path.split("/")
    for depth in range(1, len(parts)):
        at = layer.joinpath(*parts[:depth])
        if os.path.lexists(at) and not at.is_dir():
            return True
    return False


def _make_parents(layer: Path, path: str) -> None:
    """The folders above `path` in the layer; a whiteout or file in their place goes (the tree
    has a folder there now)."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        at = layer.joinpath(*parts[:depth])
        if os.path.lexists(at) and not stat.S_ISDIR(os.lstat(at).st_mode):
            os.unlink(at)
        at.mkdir(exist_ok=True)


def whiteout(path: Path) -> None:
    """The character device 0/0: overlayfs shows no file where a layer has one (any user may
    make it since Linux 5.8)."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


def self_and_ancestors(path: str) -> Iterator[str]:
    """`a/b/c`, `a/b`, `a`."""
    while path:
        yield path
        path = path.rpartition("/")[0]
