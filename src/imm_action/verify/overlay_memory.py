"""Where an overlay's base lies in memory (/dev/shm) while `imm run` runs (decision 0055): made
there when the checkout fits, claimed by the run, and swept once its run died and nobody holds
it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from imm_action.git.errors import GitError
from imm_action.git.repo import GitRepo
from imm_action.verify.trees import (
    free_to_take,
    remove_tree,
)

BASE_LOCK = "base.lock"  # in the pool's folder: held shared by every holder of the base
RUN_RECORD = "run.json"  # beside a memory base's files: its repository, the run using it
MEMORY_ROOT = "/dev/shm"


@contextlib.contextmanager
def bases_in_memory() -> Iterator[None]:
    """While the block runs (`imm run`, and the lanes and checks it forks), the base lies in
    memory when it fits; `imm run` removes it at its end (`tidy_overlays`). Outside it (a
    runner of GitHub's, where nobody would remove it; any other command) the base lies in the
    pool. First, the bases in memory whose run died go (`sweep_memory_bases`)."""
    previous = dict(MEMORY)
    MEMORY.update(allowed=True, run=process_identity(os.getpid()))
    try:
        sweep_memory_bases()
        yield
    finally:
        MEMORY.clear()
        MEMORY.update(previous)


# `run`: the `imm run` process the bases made in memory belong to (pid and start time)
MEMORY: dict[str, object] = {"allowed": False, "run": None}


def memory_root(*, make: bool) -> Path | None:
    """`/dev/shm/imm-<uid>`, when /dev/shm is there and the folder is imm's user's alone (never
    one someone else made for us to write into)."""
    shm = Path(MEMORY_ROOT)
    if not shm.is_dir():
        return None
    mine = shm / f"imm-{os.getuid()}"
    if make:
        with contextlib.suppress(FileExistsError):
            mine.mkdir(mode=0o700)
    try:
        status = os.lstat(mine)
    except OSError:
        return None
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        return None
    return mine


def memory_folder(repo: GitRepo) -> Path | None:
    """`/dev/shm/imm-<uid>/<repository>`, when allowed and the folder above is sound."""
    if not MEMORY["allowed"] or memory_root(make=True) is None:
        return None
    return memory_path(repo)


def process_identity(pid: int) -> str | None:
    """`<pid>:<start time>` of a live process (a pid alone may be reused), None when none."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = status[status.rfind(")") + 2 :].split()
    return f"{pid}:{fields[19]}" if len(fields) > 19 else None


def claim(memory: Path, repo: GitRepo) -> None:
    """The memory base's record names this run (and the repository, whose lock says whether
    anyone works over it), so that another run's sweep leaves it; written on every take, as a
    run may take up a base a dead run left."""
    run = MEMORY["run"]
    if not isinstance(run, str):
        return
    record = memory / RUN_RECORD
    text = json.dumps({"git_dir": str(repo.common_directory().resolve()), "run": run})
    with contextlib.suppress(OSError):
        if record.read_text(encoding="utf-8") == text:
            return
    partial = memory / f"{RUN_RECORD}.{os.getpid()}"
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, record)


def _run_record(base: Path) -> tuple[Path, str] | None:
    """The repository's base lock and the run a memory base's record names; None without one
    (a base being made, or one of an imm before records)."""
    try:
        record = json.loads((base / RUN_RECORD).read_text(encoding="utf-8"))
        return Path(record["git_dir"]) / "imm" / "trees" / BASE_LOCK, str(record["run"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sweep_memory_bases() -> None:
    """The bases in memory whose `imm run` died (a SIGKILL, the machine out of memory) and
    that nobody works over: each held a checkout in RAM until a reboot. A base whose run lives
    stays, and so does one a process still holds (a lane that outlived its run)."""
    mine = memory_root(make=False)
    if mine is None:
        return
    for base in sorted(mine.iterdir()):
        found = _run_record(base)
        if found is None or _alive(found[1]):
            continue
        lock = found[0]
        if not lock.parent.is_dir():  # the repository is gone, and with it every holder
            remove_base(base)
            continue
        with free_to_take(lock) as free:
            # read again under the lock: another run may have taken the base up meanwhile
            if free and _run_record(base) == found:
                remove_base(base)


def _alive(run: str) -> bool:
    pid, _, _ = run.partition(":")
    return pid.isdigit() and process_identity(int(pid)) == run


def remove_base(base: Path) -> None:
    (base / "tree-id").unlink(missing_ok=True)  # first: a half-removed base is none
    remove_tree(base)


def memory_path(repo: GitRepo) -> Path:
    """Where the repository's base lies when in memory: one folder per git directory."""
    name = hashlib.sha256(str(repo.common_directory().resolve()).encode()).hexdigest()[:20]
    return Path(MEMORY_ROOT) / f"imm-{os.getuid()}" / name


def fits_in_memory(repo: GitRepo, memory: Path) -> bool:
    """Whether the checkout (its files rounded up to pages, as tmpfs keeps them) takes at most
    a quarter of what /dev/shm and the machine have free."""
    try:
        listing = repo.git.output(["ls-tree", "-r", "-l", "-z", "HEAD"])
    except GitError:  # no HEAD to size: the pool's disk
        return False
    size = 0
    for record in listing.split("\0"):
        fields = record.split(None, 4)
        if len(fields) >= 4 and fields[3].isdigit():
            size += (int(fields[3]) // 4096 + 1) * 4096
    free = os.statvfs(memory.parent)
    room = free.f_bavail * free.f_frsize
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemAvailable:"):
                room = min(room, int(line.split()[1]) * 1024)
    return size * 4 <= room
