"""Lane folders of the layout before the tree pool (decision 0013; 0028 replaced it).

    <git common dir>/imm/lanes/<batch_id>/<task_id>+a<attempt>+p<pid>+<random>/

Lanes now work in pooled trees (verify/trees.py), freed by their holder's death. A folder of
the old layout whose owner (the pid in its name) is dead is a leftover that the next `imm run`
removes, under the repository's lane lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from imm_action.sandbox.leftovers import pid_alive

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
