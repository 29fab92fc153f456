"""Where local lanes work: one folder per lane attempt, named by batch (decision 0013).

    <git common dir>/imm/lanes/<batch_id>/<task_id>+a<attempt>+p<pid>+<random>/

The name is unique per attempt (no two lanes ever share a folder, a worktree name or an index),
and carries the pid of the lane process that owns it. A lane removes its folder when it ends, on
Ctrl-C and SIGTERM too; a folder whose owner is dead (the lane was SIGKILLed) is a leftover that
the next `imm run` removes. Creating and removing folders is serialised by a lock file per
repository, so a cleanup never sees a folder half made.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".lock"
_SEPARATOR = "+"  # never in an id (SPEC §4.1), so the owner's pid can be read back


@dataclass(frozen=True)
class LaneFolder:
    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def index(self) -> Path:
        return self.root / "imm.index"

    @property
    def prompt(self) -> Path:
        return self.root / "prompt.md"

    @property
    def owner(self) -> int | None:
        field = self.root.name.split(_SEPARATOR)
        if len(field) != 4 or not field[2].startswith("p") or not field[2][1:].isdigit():
            return None
        return int(field[2][1:])


def lanes_root(common_dir: Path) -> Path:
    return common_dir / "imm" / "lanes"


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """The repository's lane lock (an advisory `flock`, released when the holder dies)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def new_lane_folder(root: Path, batch_id: str, task_id: str, attempt: int) -> LaneFolder:
    """A fresh, empty folder for one lane attempt, owned by this process."""
    name = _SEPARATOR.join((task_id, f"a{attempt}", f"p{os.getpid()}", uuid.uuid4().hex[:8]))
    with locked(root):
        folder = root / batch_id / name
        folder.mkdir(parents=True)
    return LaneFolder(folder)


def remove_lane_folder(root: Path, folder: LaneFolder) -> None:
    with locked(root):
        remove_tree(folder.root)
        with contextlib.suppress(OSError):
            folder.root.parent.rmdir()  # the batch's folder, once its last lane is gone


def remove_leftovers(root: Path) -> list[Path]:
    """Remove every lane folder whose owner is no longer alive; the folders removed."""
    if not root.is_dir():
        return []
    removed = []
    with locked(root):
        for batch in sorted(p for p in root.iterdir() if p.is_dir()):
            for path in sorted(p for p in batch.iterdir()):
                owner = LaneFolder(path).owner
                if owner is None or not pid_alive(owner):
                    remove_tree(path)
                    removed.append(path)
            with contextlib.suppress(OSError):
                batch.rmdir()
    return removed


def remove_tree(path: Path) -> None:
    """rm -rf, also of what an executor made read-only."""

    def retry(function: object, failed: str, _: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, onerror=retry)


def pid_alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet is dead: its lane will never remove its folder)."""
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
