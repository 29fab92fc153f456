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
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from imm_action.git.repo import GitRepo, TreeEntry
from imm_action.sandbox.confine import Confinement, Overlay
from imm_action.verify.overlay_changes import differing, is_whiteout, ls_tree, upper_entries
from imm_action.verify.overlay_layer import (
    GITLINK_MODE,
    LINK_MODE,
    self_and_ancestors,
    whiteout,
    write_layer,
)
from imm_action.verify.overlay_memory import (
    BASE_LOCK,
    claim,
    fits_in_memory,
    memory_folder,
    memory_path,
    memory_root,
    remove_base,
)
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
BASE_MAKE_LOCK = "base.make"
ON_DISK_MARK = "base-on-disk"  # this run found no room in memory for the base
PLACE_PREFIX = "overlay-"
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
        copied, removed = upper_entries(self.upper)
        skip = {folder.strip("/") for folder in writable if folder.strip("/")}

        def outside(path: str) -> bool:
            return not any(at in skip for at in self_and_ancestors(path))

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
            if any(at in removed for at in self_and_ancestors(path)):
                changed.add(path)
            elif path in over:
                copies[path] = entry
            else:
                # below a path the upper holds a file or link at: a tracked folder replaced by
                # a file or a link, the folder itself is the change (issue 42 #1)
                changed.add(next((at for at in self_and_ancestors(path) if at in over), path))
        changed.update(differing(self.upper, copies, self.repo))
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
                if is_whiteout(status):
                    return False
                if depth == len(parts) or not stat.S_ISDIR(status.st_mode):
                    return depth == len(parts)
        return os.path.lexists(self.base.joinpath(*parts))

    def _entries(self, paths: list[str]) -> dict[str, TreeEntry]:
        """The tree's entries at and below `paths`, taken literally."""
        found: dict[str, TreeEntry] = {}
        ordered = sorted(set(paths))
        for at in range(0, len(ordered), 1000):  # bounded command lines
            found.update(ls_tree(self.repo, self.tree, ordered[at : at + 1000], recursive=True))
        return found

    def written(self) -> list[str] | None:
        """Every path the upper folder holds a file, link or whiteout at (an opaque folder: the
        folder), outside the lane's `.git`; None when another repository lies in the tree
        (`add -A` takes it as a whole)."""
        copied, removed = upper_entries(self.upper)
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
        found = ls_tree(self.repo, self.tree, [relative], recursive=False).get(relative)
        if found is None:
            return None
        return {"040000": "dir", "100755": "exec", LINK_MODE: "link",
                GITLINK_MODE: "dir"}.get(found.mode, "file")  # fmt: skip


def usable(confinement: Confinement) -> bool:
    """Whether trees can be overlays here: the sandbox runs as imm's user (not through sudo,
    which would mount as root) and the kernel mounts an overlay with a whiteout in it."""
    if confinement.bwrap is None or confinement.elevate:
        return False
    if os.environ.get("IMM_TREES") == "checkouts":  # the operator's way back to slots
        return False
    return _probe(confinement.bwrap)


PROBE_PREFIX = "imm-overlay-probe-"


def sweep_dead_probes(folder: Path) -> None:
    """Probe folders their process left in `folder` (a SIGKILL mid-probe gives a temporary
    folder no chance to go): a probe ends within its timeout, so one untouched for ten of them
    is nobody's. Only imm's user's own folders, never through a link."""
    dead_before = time.time() - 10 * _PROBE_TIMEOUT_S
    for place in folder.glob(f"{PROBE_PREFIX}*"):
        with contextlib.suppress(OSError):
            found = place.lstat()
            if (stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
                    and found.st_mtime < dead_before):  # fmt: skip
                remove_tree(place)


@cache
def _probe(bwrap: str) -> bool:
    sweep_dead_probes(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=PROBE_PREFIX) as scratch:
        root = Path(scratch)
        for name in ("lower", "upper", "work", "view"):
            (root / name).mkdir()
        (root / "lower" / "kept").write_text("kept\n", encoding="utf-8")
        (root / "lower" / "gone").write_text("gone\n", encoding="utf-8")
        layer = root / "layer"
        layer.mkdir()
        try:
            whiteout(layer / "gone")
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
    memory = memory_folder(repo)
    if memory is not None and memory.is_dir():
        claim(memory, repo)
        return memory
    on_disk = folder / BASE_SLOT
    if making and memory is not None and not (folder / ON_DISK_MARK).exists():
        if fits_in_memory(repo, memory):
            memory.mkdir(mode=0o700)
            claim(memory, repo)
            return memory
        (folder / ON_DISK_MARK).touch()  # decided for this run
    on_disk.mkdir(mode=0o700, exist_ok=True)
    return on_disk


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
    if not (folder / BASE_LOCK).exists():
        return  # no base was ever made here (a run refused before its first check, say)
    with free_to_take(folder / BASE_LOCK) as free:
        if not free:
            return
        # in memory: whatever allows it now (an interrupted run tidies after its block)
        memory = memory_path(repo) if memory_root(make=False) is not None else None
        on_disk = folder / BASE_SLOT
        small = index_entries(on_disk / "index") < threshold
        for base in ([memory] if memory is not None else []) + ([on_disk] if small else []):
            remove_base(base)
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
