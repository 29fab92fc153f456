"""The temporary folders of earlier test sessions, deleted after the session (ADR 0065).

pytest keeps the newest three `pytest-<n>` folders under `$TMP/pytest-of-<user>` and deletes
the rest when a session ends, in the session's own time: a whole-suite folder holds some
200,000 files, 17-35 s of a disk's time, added to every run after the third on a machine. Here,
just before pytest would, the folders it would delete are moved aside (a rename: instant) and
deleted by a detached process of the lowest priority, after the session has returned."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

PREFIX = "pytest-"
STALE_PREFIX = "imm-stale-"  # neither `pytest-` nor pytest's own `garbage-`: left to us
LOCK = ".lock"  # pytest's: a session holds its folder's while it runs


def doomed(root: Path, kept: int) -> list[Path]:
    """The numbered folders but the newest `kept`, never one whose session holds its lock:
    what pytest deletes when a session ends (`kept`: `tmp_path_retention_count`)."""
    numbered = sorted(
        (int(path.name[len(PREFIX) :]), path)
        for path in root.glob(f"{PREFIX}*")
        if path.name[len(PREFIX) :].isdigit() and not path.is_symlink() and path.is_dir()
    )
    newest = numbered[-1][0] if numbered else -1
    return [
        path for number, path in numbered if number <= newest - kept and not (path / LOCK).exists()
    ]


def delete_in_background(root: Path, kept: int) -> list[Path]:
    """Move aside what `doomed` names and start its deletion, detached; also what an earlier
    deletion left (a machine stopped mid-way). Returns the folders the deleter was given."""
    if not root.is_dir() or root.is_symlink():
        return []
    moved = []
    for path in doomed(root, kept):
        target = root / f"{STALE_PREFIX}{uuid.uuid4().hex}"
        try:
            path.rename(target)
        except OSError:
            continue  # another session took it first
        moved.append(target)
    left = [path for path in root.glob(f"{STALE_PREFIX}*") if path not in moved]
    given = moved + left
    if given:
        idle_io = "ionice -c 3 " if shutil.which("ionice") else ""
        # the shell starts the deleter in the background and ends: the deleter, its own
        # session's, outlives the suite and is nobody's child to wait for
        subprocess.run(
            ["sh", "-c", f'{idle_io}nice -n 19 rm -rf -- "$@" >/dev/null 2>&1 &', "sh",
             *map(str, given)],
            stdin=subprocess.DEVNULL, check=True, start_new_session=True,
        )  # fmt: skip
    return given


def sessions_root() -> Path:
    """Where pytest puts its numbered folders (PYTEST_DEBUG_TEMPROOT, else the temp dir), as
    its `TempPathFactory.getbasetemp` names it."""
    try:
        user = getpass.getuser()
    except (ImportError, OSError, KeyError):
        user = "unknown"
    temproot = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()).resolve()
    return temproot / f"pytest-of-{user}"
