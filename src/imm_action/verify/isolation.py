"""Integration checks run where imm's credentials are not (SPEC §8, decision 0031).

A check runs code a lane wrote. Run as imm's own user, it can read every process of that user
(`/proc/<pid>/environ` of the pass that holds the write token), write the user's home
(`~/.gitconfig` redirects imm's next push), the checkout's `.git`, `$GITHUB_ENV`. So where imm
can become another user — it runs as root (act, containers) or has passwordless sudo (GitHub's
hosted runners) — every integration check and `check_setup` runs as the unprivileged user
`imm-check`, in a PID namespace of its own (`unshare --pid --fork --kill-child --mount-proc`:
it sees no other process, and when the command ends the kernel ends everything it left), with
no capabilities and no way to gain any (`setpriv --no-new-privs`). It can write only its check
tree and its own home and temp folders, which lie under one folder made for the run
(`CheckArea`): not under the repository, whose parents may be closed to others (root's home is
0700)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.model.config import IntegrationIsolation

CHECK_USER = "imm-check"
_TIMEOUT_S = 60.0


class IsolationError(UsageError):
    """Checks would run within the token's reach, and the config does not allow it."""


@dataclass(frozen=True)
class CheckUser:
    """The unprivileged user checks run as, and how imm becomes it: `elevate` is empty as
    root, `sudo -n` otherwise."""

    name: str
    uid: int
    gid: int
    elevate: tuple[str, ...] = ()

    def command(self, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
        """`argv` as this user, in a PID namespace of its own, with no capability."""
        inner = [
            # imm killed (SIGKILL, a cancelled job): `unshare` dies with it, and so, through
            # --kill-child, every process of the namespace; no check runs on unwatched
            "setpriv", "--pdeathsig=SIGKILL",
            "unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc",
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *argv,
        ]  # fmt: skip
        if not self.elevate:
            return inner
        # sudo replaces the environment: the command's own goes through `env -i`
        return [*self.elevate, "env", "-i", *(f"{k}={v}" for k, v in env.items()), *inner]

    def own(self, path: Path) -> None:
        """`path` and everything under it this user's (what a check may write)."""
        if self.elevate:
            self._as_root(["chown", "-R", f"{self.uid}:{self.gid}", str(path)])
            return
        # as root: a home of three folders needs no process (`chown` costs a few ms a call)
        chown_tree(path, self.uid, self.gid)

    def take_back(self, path: Path) -> None:
        """`path` and everything under it imm's again, readable by all and writable by none
        but imm (what setup made, which checks may use and not change)."""
        self._as_root(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(path)])
        self._as_root(["chmod", "-R", "a+rX,go-w", str(path)])

    def remove(self, path: Path) -> None:
        """`path` gone, whatever the user made read-only in it."""
        if not os.path.lexists(path):
            return
        if self.elevate:
            self._as_root(["rm", "-rf", "--one-file-system", str(path)])
        else:
            shutil.rmtree(path, ignore_errors=True)

    def _as_root(self, argv: list[str]) -> None:
        subprocess.run([*self.elevate, *argv], check=True, capture_output=True, timeout=_TIMEOUT_S)


def chown_tree(path: Path, uid: int, gid: int) -> None:
    """`chown -R` without a process, links changed themselves (never what they point to)."""
    os.chown(path, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


@dataclass
class CheckArea:
    """The folder a run's isolated checks live in: closed to listing, open to the check user
    on the paths imm hands it. `trees` holds the check trees' pool (check_setup.py puts
    setup's home here too)."""

    root: Path
    user: CheckUser

    @property
    def trees(self) -> Path:
        return self.root / "trees"

    def fresh_home(self) -> Path:
        """A home and temp folder of the check user's own, for one group of checks."""
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.root))
        os.chmod(home, 0o711)
        for part in ("tmp", ".cache"):
            (home / part).mkdir()
        self.user.own(home)
        return home

    def remove(self) -> None:
        self.user.remove(self.root)


@dataclass(frozen=True)
class Isolation:
    """How this run's integration checks are isolated, and what the log says of it."""

    user: CheckUser | None
    why: str


def choose_isolation(mode: IntegrationIsolation, *, holds_token: bool) -> Isolation:
    """`auto`: another user where imm can become one; `user`: that or an error; `none`: never.
    Without isolation, checks must not run while imm holds a token, unless the config says
    `none` (SPEC §8)."""
    if mode == "none":
        return Isolation(
            None, "integration checks run as imm's own user (integration_isolation: none)"
        )
    user = check_user()
    if user is not None:
        how = "as root" if not user.elevate else "through sudo"
        return Isolation(
            user, f"integration checks run as user {user.name} ({how}) in a PID namespace"
        )
    why = "imm can become no other user here (not root, no passwordless sudo)"
    if mode == "user" or holds_token:
        raise IsolationError(
            f"integration checks would run within reach of imm's token: {why}. Run the "
            "integrate job where imm is root or has passwordless sudo (GitHub's hosted "
            "runners do), or set `integration_isolation: none` in the config to accept the risk"
        )
    return Isolation(None, f"integration checks run as imm's own user: {why}")


def check_user() -> CheckUser | None:
    """The check user, made when missing; None when imm can become no other user."""
    elevate: tuple[str, ...] = ()
    if os.geteuid() != 0:
        if shutil.which("sudo") is None or not _succeeds(["sudo", "-n", "true"]):
            return None
        elevate = ("sudo", "-n")
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return None
    try:
        entry = pwd.getpwnam(CHECK_USER)
    except KeyError:
        made = [*elevate, "useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                "--shell", "/usr/sbin/nologin", "--user-group", CHECK_USER]  # fmt: skip
        if not _succeeds(made):
            return None
        entry = pwd.getpwnam(CHECK_USER)
    user = CheckUser(CHECK_USER, entry.pw_uid, entry.pw_gid, elevate)
    # a kernel or container that refuses the namespace: no isolation, said so
    if not _succeeds(user.command(["true"], {"PATH": "/usr/bin:/bin"})):
        return None
    return user


def open_area(user: CheckUser) -> CheckArea:
    """A fresh folder for this run's checks, in the system's temp folder (its parents are
    open to every user, unlike a home the repository may lie in)."""
    root = Path(tempfile.mkdtemp(prefix="imm-checks-", dir=_open_temp()))
    os.chmod(root, 0o711)  # the check user passes through, lists nothing
    (root / "trees").mkdir(mode=0o711)
    return CheckArea(root, user)


def _open_temp() -> str:
    for candidate in (os.environ.get("RUNNER_TEMP"), "/tmp", tempfile.gettempdir()):
        if candidate and _open_to_all(Path(candidate)):
            return candidate
    return tempfile.gettempdir()


def _open_to_all(path: Path) -> bool:
    """Whether every folder from / to `path` lets others pass."""
    with contextlib.suppress(OSError):
        current = path.resolve()
        return all(os.stat(f).st_mode & stat.S_IXOTH for f in [current, *current.parents])
    return False


def reachable(path: Path, user: CheckUser) -> bool:
    """Whether `user` may execute `path`: every folder on the way passable and the file
    executable for it (a shim under root's home is not)."""
    with contextlib.suppress(OSError):
        real = path.resolve()
        # the folders of the name as written (a link's own folder must be passable too) and
        # of where it leads
        folders = {*path.absolute().parents, *real.parents}
        return all(
            _allows(os.stat(folder), user, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
            for folder in folders
        ) and _allows(os.stat(real), user, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
    return False


def which_for(user: CheckUser, name: str, path_env: str) -> str | None:
    """`shutil.which` as `user` would search: entries it cannot reach are passed over."""
    for folder in path_env.split(os.pathsep):
        candidate = Path(folder or ".") / name
        if candidate.is_file() and reachable(candidate, user):
            return str(candidate)
    return None


def _allows(status: os.stat_result, user: CheckUser, owner: int, group: int, other: int) -> bool:
    if status.st_uid == user.uid:
        return bool(status.st_mode & owner)
    if status.st_gid == user.gid:
        return bool(status.st_mode & group)
    return bool(status.st_mode & other)


def _succeeds(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
