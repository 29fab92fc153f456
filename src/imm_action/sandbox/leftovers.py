"""What a killed run left, found by the pid in its name and removed by the next run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet is dead: it will never remove its folders)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True  # no /proc: trust kill(0)
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def remove_left_by_dead(folder: Path, prefix: str) -> None:
    """Folders `<prefix><pid>-…` in `folder` whose process is dead: what a killed run left
    (the next run removes it)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder / name, ignore_errors=True)
