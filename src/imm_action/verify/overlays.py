"""Trees as overlays over one shared checkout (decision 0055).

A pool slot (trees.py) is a whole checkout: on a repository of 100,000 files the first batch
pays one per slot — four lanes side by side wrote 4 x 400 MB at once and took 25-75 s on two
cores — and every later use pays a move (a stat of every file, 0.6-1.2 s). Where the sandbox
runs unprivileged and the kernel mounts overlays in it, a lane's or a check's tree is instead an
overlay, mounted by bubblewrap inside the sandbox only:

    base     one checkout of the pool (`.git/imm/trees/base`), at whatever tree it was last
             moved to; read-only to everything, written by imm alone;
    layer    the files the tree asked for differs in from the base, written from git's objects
             (a removed path is a whiteout, the 0/0 character device overlayfs reads as such);
    upper    what the command writes, copied up by the kernel; thrown away with the tree.

So taking a tree costs the diff from the base (a lane's change, a batch's few commits), not the
repository's size, and nothing untrusted code does reaches another tree: the base and the layer
are lower layers the kernel never writes, and the upper folder goes with the tree. Files changed
outside `writable_paths` are read from the upper folder (what was copied up and differs from the
tree, what was whited out). imm's own git runs on the merged view in a mount namespace of its
own (`view_wrapper`), which stats every file once: the base's index stat data holds through the
overlay for every file the layer does not replace.

The base moves to the tree asked for only when the layer would be big (`MOVE_BASE_FROM_PATHS`)
and nobody holds it (a shared `flock` per holder; moving takes it exclusive), so a busy pool
works from layers and an idle one catches up. `imm run` keeps it in memory (/dev/shm) when it
fits, and removes it at its end; elsewhere it lies in the pool.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from imm_action.git.errors import GitError
from imm_action.git.repo import GONE_MODE, GitRepo, TreeEntry
from imm_action.verify.confine import Confinement, Overlay
from imm_action.verify.trees import (
    KEEP_TREES_FROM_FILES,
    CheckoutTree,
    checked_out,
    free_to_take,
    index_entries,
    move_slot,
    pool_folder,
    remove_tree,
)

BASE_SLOT = "base"
BASE_LOCK = "base.lock"
BASE_MAKE_LOCK = "base.make"
ON_DISK_MARK = "base-on-disk"  # this run found no room in memory for the base
RUN_RECORD = "run.json"  # beside a memory base's files: its repository, the run using it
MEMORY_ROOT = "/dev/shm"
PLACE_PREFIX = "overlay-"
_LINK_MODE = "120000"
_GITLINK_MODE = "160000"
_PROBE_TIMEOUT_S = 30.0
# A layer of more paths than this has the base moved instead, when nobody holds it.
MOVE_BASE_FROM_PATHS = 2000


@dataclass(frozen=True)
class OverlayTree:
    """A tree seen as base + layer + upper inside the sandbox; its files live nowhere else."""

    repo: GitRepo
    tree: str  # the tree id it shows
    bwrap: str
    base: Path  # the base checkout (lowest layer)
    base_index: Path
    layer: Path
    slot: Path  # this tree's own folder: upper, work, view, index, a lane's prompt and home

    @property
    def upper(self) -> Path:
        return self.slot / "upper"

    @property
    def root(self) -> Path:
        """Where imm's own git sees the merged tree (`view_wrapper`): an empty folder outside
        that namespace."""
        return self.slot / "view"

    @property
    def index(self) -> Path:
        """imm's index of the merged tree: the base's, moved to `tree` with its stat data."""
        return self.slot / "index"

    def mount(self, target: str) -> Overlay:
        return Overlay((self.base, self.layer), self.upper, self.slot / "work", target)

    def view_wrapper(self) -> tuple[str, ...]:
        """The argv prefix that runs a trusted command of imm's (git) with the merged tree at
        `root`: the host as it is, the overlay mounted on top, in namespaces of its own."""
        mount = self.mount(str(self.root))
        return (self.bwrap, "--die-with-parent", "--unshare-pid", "--dev-bind", "/", "/",
                *mount.arguments(), "--chdir", str(self.root), "--")  # fmt: skip

    def changed(self, writable: tuple[str, ...]) -> list[str]:
        """Tracked files modified, removed or re-typed since the tree was taken, outside
        `writable` (new files, such as caches, are not changes to the tree under test): what
        the upper folder holds over a file of the lower layers and differs from it, and what
        it whites out."""
        copied, removed = _upper_entries(self.upper)
        skip = {folder.strip("/") for folder in writable if folder.strip("/")}

        def outside(path: str) -> bool:
            return not any(at in skip for at in _self_and_ancestors(path))

        # a new file (a cache) has nothing below it: only what the lower layers hold is asked
        over = {path for path in copied if outside(path) and self._below(path)}
        tracked = self._entries([*over, *removed])
        changed: set[str] = set()
        copies: dict[str, TreeEntry] = {}
        # each path is looked up by its ancestors (a set each): O(paths * depth), where a scan
        # of every removed path per tracked one cost 57 s at 10,000 of each (issue 42 #6)
        for path, entry in tracked.items():
            if not outside(path):
                continue
            if any(at in removed for at in _self_and_ancestors(path)):
                changed.add(path)
            elif path in over:
                copies[path] = entry
            else:
                # below a path the upper holds a file or link at: a tracked folder replaced by
                # a file or a link, the folder itself is the change (issue 42 #1)
                changed.add(next((at for at in _self_and_ancestors(path) if at in over), path))
        changed.update(_differing(self.upper, copies, self.repo))
        return sorted(changed)

    def fresh_view(self, tree: str) -> None:
        """The tree as taken again, nothing any command wrote in it left (issue 42 #1): a new
        upper and work folder — the lower layers are the kernel's to keep, never written. For a
        check's tree only: a lane's upper holds its executor's work."""
        if tree != self.tree:
            raise ValueError(f"an overlay of {self.tree[:12]} cannot show {tree[:12]}")
        for name in ("upper", "work"):
            remove_tree(self.slot / name)
            (self.slot / name).mkdir(mode=0o700)

    def _below(self, path: str) -> bool:
        """Whether the lower layers (layer over base) hold `path`."""
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            at = self.layer.joinpath(*parts[:depth])
            with contextlib.suppress(FileNotFoundError):
                status = os.lstat(at)
                if _is_whiteout(status):
                    return False
                if depth == len(parts) or not stat.S_ISDIR(status.st_mode):
                    return depth == len(parts)
        return os.path.lexists(self.base.joinpath(*parts))

    def _entries(self, paths: list[str]) -> dict[str, TreeEntry]:
        """The tree's entries at and below `paths`, taken literally."""
        found: dict[str, TreeEntry] = {}
        ordered = sorted(set(paths))
        for at in range(0, len(ordered), 1000):  # bounded command lines
            found.update(_ls_tree(self.repo, self.tree, ordered[at : at + 1000], recursive=True))
        return found

    def written(self) -> list[str] | None:
        """Every path the upper folder holds a file, link or whiteout at (an opaque folder: the
        folder), outside the lane's `.git`; None when another repository lies in the tree
        (`add -A` takes it as a whole)."""
        copied, removed = _upper_entries(self.upper)
        paths: list[str] = []
        for path in sorted({*copied, *removed}):
            if path == ".git" or path.startswith(".git/"):
                continue
            if f"/{path}".rfind("/.git/") >= 0 or path.endswith("/.git"):
                return None
            paths.append(path)
        return paths

    @contextlib.contextmanager
    def untrusted(self) -> Iterator[None]:
        """Nothing beside this tree is in reach of what runs in it: no index to watch."""
        yield

    @contextlib.contextmanager
    def lent(self) -> Iterator[None]:
        """A lane's checks take a tree of their own: it costs a layer, not a move."""
        yield None

    def drop_lane(self) -> None:
        """Everything of the lane's goes with the tree's folder."""

    def entry_kind(self, relative: str) -> str | None:
        """What `relative` (normalised, inside the tree) is in `tree`: `dir`, `file`, `exec`,
        `link`, or None where it is nothing — the tree as the command finds it."""
        if relative in ("", "."):
            return "dir"
        found = _ls_tree(self.repo, self.tree, [relative], recursive=False).get(relative)
        if found is None:
            return None
        return {"040000": "dir", "100755": "exec", _LINK_MODE: "link",
                _GITLINK_MODE: "dir"}.get(found.mode, "file")  # fmt: skip


def usable(confinement: Confinement) -> bool:
    """Whether trees can be overlays here: the sandbox runs as imm's user (not through sudo,
    which would mount as root) and the kernel mounts an overlay with a whiteout in it."""
    if confinement.bwrap is None or confinement.elevate:
        return False
    if os.environ.get("IMM_TREES") == "checkouts":  # the operator's way back to slots
        return False
    return _probe(confinement.bwrap)


@cache
def _probe(bwrap: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="imm-overlay-probe-") as scratch:
        root = Path(scratch)
        for name in ("lower", "upper", "work", "view"):
            (root / name).mkdir()
        (root / "lower" / "kept").write_text("kept\n", encoding="utf-8")
        (root / "lower" / "gone").write_text("gone\n", encoding="utf-8")
        layer = root / "layer"
        layer.mkdir()
        try:
            _whiteout(layer / "gone")
        except OSError:
            return False
        mount = Overlay((root / "lower", layer), root / "upper", root / "work", str(root / "view"))
        argv = [bwrap, "--dev-bind", "/", "/", *mount.arguments(), "--", "/bin/sh", "-c",
                f'test -f "{root}/view/kept" && test ! -e "{root}/view/gone"']  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S,
                                  check=False, stdin=subprocess.DEVNULL)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


def taken_tree(
    repo: GitRepo, tree: str, confinement: Confinement, *, lane: bool = False
) -> contextlib.AbstractContextManager[CheckoutTree | OverlayTree]:
    """A tree for a lane or a check at `tree`: an overlay where `usable`, else a slot of the
    pool. A lane's overlay gets an index (its snapshot, its executor's git); a check's needs
    none."""
    if confinement.bwrap is not None and usable(confinement):
        return overlay_tree(repo, tree, confinement.bwrap, index=lane)
    return checked_out(repo, tree)


@contextlib.contextmanager
def overlay_tree(
    repo: GitRepo, tree: str, bwrap: str, *, index: bool = True
) -> Iterator[OverlayTree]:
    """`tree` (a tree or commit) as an overlay over the pool's base, held until the block ends;
    its folder goes then."""
    folder = pool_folder(repo)
    wanted = repo.tree_of(tree)
    slot = Path(tempfile.mkdtemp(prefix=PLACE_PREFIX, dir=folder))
    lock = os.open(slot / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ours: tidy_overlays leaves a held one alone
        with _held_base(repo, folder, wanted) as (base, change):
            for name in ("upper", "work", "view", "layer"):
                (slot / name).mkdir(mode=0o700)
            write_layer(repo, change, slot / "layer")
            overlay = OverlayTree(repo, wanted, bwrap, base / "tree", base / "index",
                                  slot / "layer", slot)  # fmt: skip
            if index:
                _index_at(overlay, wanted)
            yield overlay
    finally:
        remove_tree(slot)
        os.close(lock)


@contextlib.contextmanager
def _held_base(repo: GitRepo, folder: Path, wanted: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """The base under a shared lock, with what `wanted` differs in from the tree it holds (the
    layer, `GitRepo.tree_change`): moved to `wanted` first when that is far and nobody works
    over it, or made on first use. Every holder works over it with the lock shared; only a
    move takes it exclusive, so takers never wait on each other."""
    lock = os.open(folder / BASE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        while True:
            fcntl.flock(lock, fcntl.LOCK_SH)  # waits only while the base is being moved
            base = _base_place(repo, folder)
            held = _recorded(base)
            if held is None:
                fcntl.flock(lock, fcntl.LOCK_UN)
                _make_base(repo, folder, lock, wanted)
                continue
            change = repo.tree_change(held, wanted) if held != wanted else {}
            if len(change) <= MOVE_BASE_FROM_PATHS:
                break  # near: a layer costs less than moving the base (a stat of every file)
            try:  # far: moved if nobody works over it (a failed try may drop our shared lock)
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fcntl.flock(lock, fcntl.LOCK_SH)
                if _recorded(base) == held:
                    break  # in use: work from a layer over it
                continue
            _move_base(repo, _base_place(repo, folder, making=True), wanted)
        yield base, change
    finally:
        os.close(lock)


def _make_base(repo: GitRepo, folder: Path, lock: int, wanted: str) -> None:
    """The base made, by one taker at a time (the others wait for it on `base.make`, holding
    nothing of `base.lock`, so the maker's exclusive lock waits on nobody's work)."""
    maker = os.open(folder / BASE_MAKE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(maker, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_SH)
        if _recorded(_base_place(repo, folder)) is None:
            # nobody works over a base that is not there: the exclusive lock waits only on
            # takers reading, as this one did, that it is not
            fcntl.flock(lock, fcntl.LOCK_EX)
            base = _base_place(repo, folder, making=True)
            if _recorded(base) is None:
                _move_base(repo, base, wanted)
        fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(maker)


def _base_place(repo: GitRepo, folder: Path, *, making: bool = False) -> Path:
    """Where the base lies: in memory (a folder of imm's user under /dev/shm, made by the first
    taker of a run when the checkout fits in a quarter of the free memory; gone at the run's
    end) — writing 100,000 files to a busy disk took 12-42 s here, to memory 1.8 s — else in
    the pool. `making`: the caller holds the lock exclusively and may choose."""
    memory = _memory_folder(repo)
    if memory is not None and memory.is_dir():
        _claim(memory, repo)
        return memory
    on_disk = folder / BASE_SLOT
    if making and memory is not None and not (folder / ON_DISK_MARK).exists():
        if _fits_in_memory(repo, memory):
            memory.mkdir(mode=0o700)
            _claim(memory, repo)
            return memory
        (folder / ON_DISK_MARK).touch()  # decided for this run
    on_disk.mkdir(mode=0o700, exist_ok=True)
    return on_disk


@contextlib.contextmanager
def bases_in_memory() -> Iterator[None]:
    """While the block runs (`imm run`, and the lanes and checks it forks), the base lies in
    memory when it fits; `imm run` removes it at its end (`tidy_overlays`). Outside it (a
    runner of GitHub's, where nobody would remove it; any other command) the base lies in the
    pool. First, the bases in memory whose run died go (`sweep_memory_bases`)."""
    previous = dict(_MEMORY)
    _MEMORY.update(allowed=True, run=_process_identity(os.getpid()))
    try:
        sweep_memory_bases()
        yield
    finally:
        _MEMORY.clear()
        _MEMORY.update(previous)


# `run`: the `imm run` process the bases made in memory belong to (pid and start time)
_MEMORY: dict[str, object] = {"allowed": False, "run": None}


def _memory_root(*, make: bool) -> Path | None:
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


def _memory_folder(repo: GitRepo) -> Path | None:
    """`/dev/shm/imm-<uid>/<repository>`, when allowed and the folder above is sound."""
    if not _MEMORY["allowed"] or _memory_root(make=True) is None:
        return None
    return memory_path(repo)


def _process_identity(pid: int) -> str | None:
    """`<pid>:<start time>` of a live process (a pid alone may be reused), None when none."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = status[status.rfind(")") + 2 :].split()
    return f"{pid}:{fields[19]}" if len(fields) > 19 else None


def _claim(memory: Path, repo: GitRepo) -> None:
    """The memory base's record names this run (and the repository, whose lock says whether
    anyone works over it), so that another run's sweep leaves it; written on every take, as a
    run may take up a base a dead run left."""
    run = _MEMORY["run"]
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
    mine = _memory_root(make=False)
    if mine is None:
        return
    for base in sorted(mine.iterdir()):
        found = _run_record(base)
        if found is None or _alive(found[1]):
            continue
        lock = found[0]
        if not lock.parent.is_dir():  # the repository is gone, and with it every holder
            _remove_base(base)
            continue
        with free_to_take(lock) as free:
            # read again under the lock: another run may have taken the base up meanwhile
            if free and _run_record(base) == found:
                _remove_base(base)


def _alive(run: str) -> bool:
    pid, _, _ = run.partition(":")
    return pid.isdigit() and _process_identity(int(pid)) == run


def _remove_base(base: Path) -> None:
    (base / "tree-id").unlink(missing_ok=True)  # first: a half-removed base is none
    remove_tree(base)


def memory_path(repo: GitRepo) -> Path:
    """Where the repository's base lies when in memory: one folder per git directory."""
    name = hashlib.sha256(str(repo.common_directory().resolve()).encode()).hexdigest()[:20]
    return Path(MEMORY_ROOT) / f"imm-{os.getuid()}" / name


def _fits_in_memory(repo: GitRepo, memory: Path) -> bool:
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


def tidy_overlays(repo: GitRepo, keep_from_files: int | None = None) -> None:
    """At the end of a run: the folders of overlays whose holder died; the base when it lies in
    memory (the next run makes it again in about a second per 100,000 files), or in the pool
    with fewer files than are worth keeping (decision 0030)."""
    threshold = KEEP_TREES_FROM_FILES if keep_from_files is None else keep_from_files
    folder = pool_folder(repo)
    for place in sorted(folder.glob(f"{PLACE_PREFIX}*")):
        with free_to_take(place / "lock") as free:
            if free:
                remove_tree(place)
    with free_to_take(folder / BASE_LOCK) as free:
        if not free:
            return
        # in memory: whatever allows it now (an interrupted run tidies after its block)
        memory = memory_path(repo) if _memory_root(make=False) is not None else None
        on_disk = folder / BASE_SLOT
        small = index_entries(on_disk / "index") < threshold
        for base in ([memory] if memory is not None else []) + ([on_disk] if small else []):
            _remove_base(base)
        (folder / ON_DISK_MARK).unlink(missing_ok=True)


def _recorded(base: Path) -> str | None:
    """The tree the base holds, written once its move ended; None while it moves or after a
    move that died."""
    try:
        text = (base / "tree-id").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def _move_base(repo: GitRepo, base: Path, wanted: str) -> None:
    (base / "tree-id").unlink(missing_ok=True)
    move_slot(repo, base, wanted)
    (base / "tree-id").write_text(wanted + "\n", encoding="utf-8")


def _index_at(overlay: OverlayTree, wanted: str) -> None:
    """imm's index of the merged tree: the base's, moved to `wanted` by a one-tree merge, which
    keeps the stat data of every entry `wanted` does not change (so git stats, not reads, the
    files the layer does not replace)."""
    shutil.copyfile(overlay.base_index, overlay.index)
    # the base's own files as work tree (never the user's); `--reset`: no entry is asked to be
    # up to date, none is written
    overlay.repo.git.run(
        [f"--work-tree={overlay.base}", "read-tree", "--reset", wanted],
        env={"GIT_INDEX_FILE": str(overlay.index)},
    )


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
            _whiteout(target)
    blobs = repo.read_blobs(change[path].split(" ", 1)[1] for path in written)
    for path in written:
        mode, oid = change[path].split(" ", 1)
        target = layer / path
        _make_parents(layer, path)
        remove_tree(target)  # a whiteout or folder left by the removals above
        if mode == _GITLINK_MODE:
            target.mkdir()
        elif mode == _LINK_MODE:
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


def _whiteout(path: Path) -> None:
    """The character device 0/0: overlayfs shows no file where a layer has one (any user may
    make it since Linux 5.8)."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


def _self_and_ancestors(path: str) -> Iterator[str]:
    """`a/b/c`, `a/b`, `a`."""
    while path:
        yield path
        path = path.rpartition("/")[0]


def _is_whiteout(status: os.stat_result) -> bool:
    return stat.S_ISCHR(status.st_mode) and status.st_rdev == 0


def _upper_entries(upper: Path) -> tuple[set[str], set[str]]:
    """(paths copied up or made, paths removed) in an upper folder: a whiteout removes its
    path; an opaque folder (removed and made again) removes all the lower layers had below it."""
    copied: set[str] = set()
    removed: set[str] = set()
    for folder, dirs, files in os.walk(upper):
        relative = os.path.relpath(folder, upper)
        prefix = "" if relative == "." else relative + "/"
        if prefix and _opaque(folder):
            removed.add(relative)
        for name in [*files, *dirs]:
            status = os.lstat(os.path.join(folder, name))
            if _is_whiteout(status):
                removed.add(prefix + name)
            elif not stat.S_ISDIR(status.st_mode):
                copied.add(prefix + name)
    return copied, removed


def _opaque(folder: str) -> bool:
    """Whether overlayfs marked `folder` opaque (removed and made again): `user.` where the
    sandbox mounted it, `trusted.` where root did."""
    for name in ("user.overlay.opaque", "trusted.overlay.opaque"):
        with contextlib.suppress(OSError):
            if os.getxattr(folder, name, follow_symlinks=False) == b"y":
                return True
    return False


def _ls_tree(
    repo: GitRepo, tree: str, paths: list[str], *, recursive: bool
) -> dict[str, TreeEntry]:
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


def _differing(upper: Path, copies: dict[str, TreeEntry], repo: GitRepo) -> set[str]:
    """The files copied up that are no longer their tracked entry: the kernel copies a file up
    when it is opened for writing, or its mode or time set, whether it then differs or not."""
    differing: set[str] = set()
    hashed: list[str] = []
    for path, entry in copies.items():
        status = os.lstat(upper / path)
        if stat.S_ISLNK(status.st_mode):
            target = os.readlink(upper / path).encode("utf-8", "surrogateescape")
            if entry.mode != _LINK_MODE or repo.read_blobs([entry.oid]).get(entry.oid) != target:
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
