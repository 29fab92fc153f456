"""Reading what a command changed in an overlay tree (decision 0055): what its upper folder holds
— copied-up files that differ from the tree, whiteouts, opaque folders — compared with git's
index of the tree."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from imm_action.git.repo import GitRepo, TreeEntry
from imm_action.verify.overlay_layer import LINK_MODE


def is_whiteout(status: os.stat_result) -> bool:
    return stat.S_ISCHR(status.st_mode) and status.st_rdev == 0


def upper_entries(upper: Path) -> tuple[set[str], set[str]]:
    """(paths copied up or made, paths removed) in an upper folder: a whiteout removes its
    path; an opaque folder (removed and made again) removes all the lower layers had below it."""
    copied: set[str] = set()
    removed: set[str] = set()
    for folder, dirs, files in os.walk(upper):
        relative = os.path.relpath(folder, upper)
        prefix = "" if relative == "." else relative + "/"
        if prefix and opaque(folder):
            removed.add(relative)
        for name in [*files, *dirs]:
            status = os.lstat(os.path.join(folder, name))
            if is_whiteout(status):
                removed.add(prefix + name)
            elif not stat.S_ISDIR(status.st_mode):
                copied.add(prefix + name)
    return copied, removed


def opaque(folder: str) -> bool:
    """Whether overlayfs marked `folder` opaque (removed and made again): `user.` where the
    sandbox mounted it, `trusted.` where root did."""
    for name in ("user.overlay.opaque", "trusted.overlay.opaque"):
        with contextlib.suppress(OSError):
            if os.getxattr(folder, name, follow_symlinks=False) == b"y":
                return True
    return False


def ls_tree(repo: GitRepo, tree: str, paths: list[str], *, recursive: bool) -> dict[str, TreeEntry]:
    """`ls-tree` of `tree` at `paths`, taken literally (a file may be named `*`)."""
    if not paths:
        return {}
    args = ["ls-tree", "-z", "--full-tree", *(["-r"] if recursive else []), tree, "--", *paths]
    listing = repo.git.output(args, env={"GIT_LITERAL_PATHSPECS": "1"})
    entries: dict[str, TreeEntry] = {}
    for record in listing.split("\0"):
        if record:
            info, _, path = record.partition("\t")
            mode, _, oid = info.split()
            entries[path] = TreeEntry(mode, oid, None)
    return entries


def differing(upper: Path, copies: dict[str, TreeEntry], repo: GitRepo) -> set[str]:
    """The files copied up that are no longer their tracked entry: the kernel copies a file up
    when it is opened for writing, or its mode or time set, whether it then differs or not."""
    differing: set[str] = set()
    hashed: list[str] = []
    for path, entry in copies.items():
        status = os.lstat(upper / path)
        if stat.S_ISLNK(status.st_mode):
            target = os.readlink(upper / path).encode("utf-8", "surrogateescape")
            if entry.mode != LINK_MODE or repo.read_blobs([entry.oid]).get(entry.oid) != target:
                differing.add(path)
        elif (
            not stat.S_ISREG(status.st_mode)
            or entry.mode not in ("100644", "100755")
            or bool(status.st_mode & stat.S_IXUSR) != (entry.mode == "100755")
            or "\n" in path
        ):
            differing.add(path)
        else:
            hashed.append(path)
    if hashed:
        listing = repo.git.output(["hash-object", "--no-filters", "--stdin-paths"],
                                  input_text="".join(f"{upper / p}\n" for p in hashed))  # fmt: skip
        for path, oid in zip(hashed, listing.split(), strict=True):
            if oid != copies[path].oid:
                differing.add(path)
    return differing
