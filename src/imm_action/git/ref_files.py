"""Reading refs straight from git's files backend: a loose ref file, else `packed-refs`.

Every pass reads a handful of refs (the state, the batch branch, the lanes' outcomes), and
each `git for-each-ref` costs a process of ~3 ms: most of a pass on a small batch, and a
pass sits on every dependency hop of `imm run`. Reading the files is what git does itself,
and is safe against git's writers: a loose ref is replaced by a rename (its file is the old
value or the new one, never half), a loose ref wins over its packed copy, and `pack-refs`
writes `packed-refs` before it deletes the loose files it packed.

A folder of refs is listed the same way (the loose files under it, then `packed-refs`).

Anything this module does not fully understand returns None, and the caller asks git: a
reftable repository, a per-worktree ref, a name git might read differently (`..`, a
`.lock`, odd characters), a symbolic ref, a file that holds no object id, an unreadable
file, or a `packed-refs` line it cannot parse.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

# Full names of shared refs only: the per-worktree ones live in a worktree's own git dir.
_PER_WORKTREE = ("refs/bisect/", "refs/worktree/", "refs/rewritten/")
_PLAIN_NAME = re.compile(r"refs(/[A-Za-z0-9_+=@,-][A-Za-z0-9_+=@,.-]*)+")
_LOOSE_VALUE = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64})\n?")
_PACKED_LINE = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64}) (refs/\S+)")


def read_ref_files(common_dir: Path, names: Sequence[str]) -> dict[str, str | None] | None:
    """Where each ref of `names` points (None: no such ref), or None when git must answer."""
    if not all(_plain(name) for name in names) or (common_dir / "reftable").exists():
        return None
    found: dict[str, str | None] = {}
    packed: dict[str, str] | None = None
    for name in names:
        loose = _loose(common_dir / name)
        if loose is None:
            return None
        if loose:
            found[name] = loose
            continue
        if packed is None:
            packed = _packed(common_dir / "packed-refs")
            if packed is None:
                return None
        found[name] = packed.get(name)
    return found


def list_ref_files(common_dir: Path, prefix: str) -> dict[str, str] | None:
    """Every ref under the folder `prefix` (`refs/imm/batches/`) with its object id, sorted by
    name as `git for-each-ref` lists them; None when git must answer. The loose files are
    read before `packed-refs`, as for a single ref: a ref `pack-refs` moved is found in one of
    the two, and one deleted meanwhile is either still loose (read before the deletion) or in
    neither."""
    if not prefix.endswith("/") or not _plain(prefix[:-1]) or prefix.startswith(_PER_WORKTREE):
        return None
    if (common_dir / "reftable").exists():
        return None
    found: dict[str, str] = {}
    if not _walk_loose(common_dir, prefix, found):
        return None
    packed = _packed(common_dir / "packed-refs")
    if packed is None:
        return None
    for name, oid in packed.items():
        if name.startswith(prefix):
            found.setdefault(name, oid)
    return dict(sorted(found.items()))


def _walk_loose(common_dir: Path, folder: str, found: dict[str, str]) -> bool:
    """Add the loose refs under `folder` to `found`; False when git must answer."""
    try:
        entries = list(os.scandir(common_dir / folder))
    except (FileNotFoundError, NotADirectoryError):
        return True  # nothing loose under it (a folder deleted meanwhile too)
    except OSError:
        return False
    for entry in entries:
        if entry.name.startswith(".") or entry.name.endswith(".lock"):
            continue  # git skips these too: a writer's lock, never a ref
        name = folder + entry.name
        if not _plain(name):
            return False
        try:
            if entry.is_symlink():
                return False  # git may read it as a symbolic ref
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            return False
        if is_folder:
            if not _walk_loose(common_dir, name + "/", found):
                return False
            continue
        loose = _loose(common_dir / name)
        if loose is None:
            return False  # a symbolic ref, a link, an unexpected file: git knows
        if loose:
            found[name] = loose
    return True


def read_head_branch(git_dir: Path, common_dir: Path) -> str | None:
    """The full name of the branch a worktree's HEAD names (`ref: refs/heads/<name>`), or None
    when git must answer (detached, reftable, anything else)."""
    if (common_dir / "reftable").exists():
        return None
    try:
        raw = (git_dir / "HEAD").read_bytes()
    except OSError:
        return None
    target = raw.removeprefix(b"ref: ").removesuffix(b"\n").decode("utf-8", "replace")
    if not raw.startswith(b"ref: refs/heads/") or not _plain(target):
        return None
    return target


def _plain(name: str) -> bool:
    return (
        _PLAIN_NAME.fullmatch(name) is not None
        and not name.startswith(_PER_WORKTREE)
        and ".." not in name
        and "/." not in name
        and not name.endswith((".lock", "."))
    )


def _loose(path: Path) -> str | None:
    """The object id the loose ref holds; "" when there is no loose ref of that name; None
    when git must answer (a symbolic ref, an unreadable or unexpected file)."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError:  # a folder of that name (refs under it), a permission: git knows
        return None
    matched = _LOOSE_VALUE.fullmatch(raw)
    return matched.group(1).decode() if matched else None


def _packed(path: Path) -> dict[str, str] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    refs: dict[str, str] = {}
    for line in raw.splitlines():
        if not line or line.startswith((b"#", b"^")):
            continue  # the header, a peeled tag's target
        matched = _PACKED_LINE.fullmatch(line)
        if matched is None:
            return None
        refs[matched.group(2).decode("utf-8", "surrogateescape")] = matched.group(1).decode()
    return refs
