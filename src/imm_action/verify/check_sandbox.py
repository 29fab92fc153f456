"""The sandbox a check runs in, and what gives it a fresh view between two checks of one tree:
its tree, a home of its own, and what `check_setup` prepared, shown as each check needs it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from imm_action.sandbox.confine import SETUP_HOME_SEEN_AT, Bind, Confinement
from imm_action.verify.check_queue import Fresh
from imm_action.verify.check_setup import CheckPlace, Prepared
from imm_action.verify.command_run import TESTS_FOLDER, Sandbox
from imm_action.verify.overlays import OverlayTree
from imm_action.verify.trees import CheckoutTree, remove_tree


def check_sandbox(
    tree: CheckoutTree | OverlayTree, scratch: Path, prepared: Prepared, place: CheckPlace
) -> Sandbox:
    """A check's sandbox: its tree; a home of its own, writable and fresh for each check, that
    shows what setup left in setup's home read-only (issue 59 #5: nyc writes under `$HOME`);
    and what setup left in its tree, at the same place in this one."""
    confinement = place.confinement
    root = tree.root
    home = scratch / "home"
    home.mkdir()
    binds: list[Bind] = []
    in_home: list[tuple[str, str]] = []
    if prepared.home is not None:
        # where setup saw it (its venv's scripts name their interpreter by that path), and
        # at its own path, where the PATH names its programs
        binds.append(Bind(prepared.home, str(prepared.home)))
        if confinement.active:
            binds.append(Bind(prepared.home, SETUP_HOME_SEEN_AT))
        in_home = _setup_home_entries(prepared.home, confinement)
    seen_at = confinement.tree_at if confinement.active else None
    for name, kept in prepared.binds:
        if seen_at is not None:
            binds.append(Bind(kept, f"{seen_at}/{name}"))
            binds += _cache_of(kept, f"{seen_at}/{name}", scratch / CACHES / name)
    _link_setup_leftovers(root, prepared, confinement)
    # an overlay's files exist only inside the sandbox: it is mounted there, and a command's
    # paths are looked up in its git tree
    overlay, entry_kind = None, None
    if isinstance(tree, OverlayTree) and seen_at is not None:
        overlay, entry_kind = tree.mount(seen_at), tree.entry_kind
    return Sandbox(root, home, prepared.path_env, tree.changed, confinement=confinement,
                   binds=tuple(binds), network=confinement.check_network, reach=place.reach,
                   log=place.log,
                   overlay=overlay, entry_kind=entry_kind,
                   home_binds=tuple(in_home))  # fmt: skip


# what a check's home holds of its own, never setup's: its temp, caches and test reports
_OWN_IN_HOME = frozenset({"tmp", ".cache", TESTS_FOLDER})


def _setup_home_entries(home: Path, confinement: Confinement) -> list[tuple[str, str]]:
    """What setup left in its home (a venv, `.local`), each shown read-only at its name in a
    check's own home; the toolchains' folders (`.m2`) stay theirs."""
    toolchains = confinement.toolchains
    theirs = {Path(relative).parts[0]
              for _, relative in (*toolchains.in_home, *toolchains.files)}  # fmt: skip
    with contextlib.suppress(OSError):
        return [(str(home / name), name) for name in sorted(os.listdir(home))
                if name not in _OWN_IN_HOME and name not in theirs]  # fmt: skip
    return []


CACHES = "caches"  # in a check's scratch: the writable caches of what setup prepared


def _cache_of(kept: Path, seen_at: str, own: Path) -> list[Bind]:
    """A folder `check_setup` prepared stays shared and read-only, but the cache tools write
    into it (`node_modules/.cache`: nyc, babel-loader, eslint, webpack) is the check's own,
    fresh for each check (issue 43 #4: every nyc check failed with EROFS). [] where the
    prepared thing is a file, or its `.cache` cannot be made to mount on."""
    if not kept.is_dir() or kept.is_symlink():
        return []
    try:
        (kept / ".cache").mkdir(exist_ok=True)  # the mount point, in imm's own setup folder
        own.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return [Bind(own, f"{seen_at}/.cache", writable=True)]


def _link_setup_leftovers(root: Path, prepared: Prepared, confinement: Confinement) -> None:
    """Unconfined, what `check_setup` left in its tree is linked into this one (confined, the
    sandbox binds it): links the next holder's sweep removes (trees.py)."""
    if confinement.active:
        return
    for name, kept in prepared.binds:
        if not os.path.lexists(root / name):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(kept, root / name)


def fresh_view(
    tree: CheckoutTree | OverlayTree,
    shown: str,
    scratch: Path,
    prepared: Prepared,
    confinement: Confinement,
) -> Fresh:
    """What puts a check's tree and scratch home back as they were before any check ran:
    called between two checks of one tree, so no check sees what another wrote (issue 42 #1:
    a check that planted a module, or swapped a folder for a link, passed its siblings)."""

    def fresh() -> None:
        tree.fresh_view(shown)
        remove_tree(scratch / "home")
        (scratch / "home").mkdir()
        for name, _ in prepared.binds:  # the caches of what setup prepared: empty again
            own = scratch / CACHES / name
            if own.is_dir():
                remove_tree(own)
                own.mkdir()
        _link_setup_leftovers(tree.root, prepared, confinement)

    return fresh
