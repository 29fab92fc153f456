"""The token imm acts with, kept out of every environment (SPEC §8, decision 0033).

An environment is readable: `/proc/<pid>/environ` shows a process's first environment to any
process of its user for as long as it lives, and children inherit it. So the action hands imm
its token in a file only the runner's user can read (`IMM_TOKEN_FILE`, mode 0600), which imm
reads once, at its start, and removes. The token then lives in this module's memory only; git
gets the basic-auth header, scoped to `IMM_GIT_SERVER`, for the network commands that need it
(fetch, push, ls-remote) from a 0600 file that exists while the command runs (`git_config_file`:
git's own environment is in /proc too), and nothing else gets it. Holding it, the
process is made non-dumpable (`PR_SET_DUMPABLE` 0): another process of the same user can no
longer read its memory or environment through /proc or ptrace. A process imm forks keeps that;
one it starts (`exec`) does not, and gets no token.

Run by hand, imm still takes `GITHUB_TOKEN` from its environment (the user put it there); in
imm's own process it then zeroes it in the block /proc shows and removes it from `os.environ`."""

from __future__ import annotations

import base64
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TOKEN_FILE = "IMM_TOKEN_FILE"
GIT_SERVER = "IMM_GIT_SERVER"
_PR_SET_DUMPABLE = 4
_ENVIRONMENT_TOKENS = ("GITHUB_TOKEN", "GH_TOKEN", "IMM_TOKEN", "INPUT_GITHUB_TOKEN")


@dataclass
class _Held:
    token: str | None = None
    server: str | None = None  # what the header is scoped to: scheme://host/
    folder: Path | None = None  # where the token file lay: hidden from lane code (confine.py)


_HELD = _Held()


class CredentialError(Exception):
    """The token file cannot be read."""


def take_credentials(*, own_process: bool = False) -> None:
    """At imm's start: the token file read and removed, and the process made non-dumpable
    when it now holds a token. Without a token file, whatever an earlier call took is
    forgotten (a test runs many commands in one process). In imm's own process
    (`own_process`, not a test calling `main`), a token a person left in its environment is
    taken too: its value zeroed in the block /proc shows, and gone from `os.environ`."""
    path = os.environ.pop(TOKEN_FILE, None)
    _HELD.token = None
    _HELD.folder = Path(path).parent if path else None
    _HELD.server = os.environ.get(GIT_SERVER)
    if not path:
        if any(os.environ.get(name) for name in _ENVIRONMENT_TOKENS):
            # a person's token in imm's own environment (run by hand): /proc shows it for
            # as long as imm lives; at least no other process of the user may read it there
            not_dumpable()
            if own_process:
                _take_from_environment()
        return
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as error:
        raise CredentialError(f"cannot read the token file {path}: {error.strerror}") from None
    with contextlib.suppress(OSError):
        os.unlink(path)
    _HELD.token = token or None
    if _HELD.token:
        not_dumpable()


def token_folder() -> Path | None:
    """The folder the token file lay in (the action's: other files of its may lie there)."""
    return _HELD.folder


def token() -> str | None:
    """The token imm acts with: the one it took, else the environment's."""
    return _HELD.token or os.environ.get("GITHUB_TOKEN") or os.environ.get("INPUT_GITHUB_TOKEN")


def git_auth() -> dict[str, str]:
    """The variables that give a network git command the token (none: no token taken)."""
    if not _HELD.token or not _HELD.server:
        return {}
    basic = base64.b64encode(f"x-access-token:{_HELD.token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{_HELD.server}.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


@contextlib.contextmanager
def git_config_file() -> Iterator[list[str]]:
    """`-c include.path=<file>` giving one network git command the header: a 0600 file in a
    fresh 0700 folder, gone when the block ends. Never the environment, which /proc shows to
    every process of the user while git runs; never argv. No arguments without a token."""
    auth = git_auth()
    if not auth:
        yield []
        return
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="imm-git-"))  # 0700
    path = folder / "config"
    try:
        _, _, rest = auth["GIT_CONFIG_KEY_0"].partition(".")
        server, _, name = rest.rpartition(".")
        value = auth["GIT_CONFIG_VALUE_0"]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f'[http "{_quoted(server)}"]\n\t{name} = "{_quoted(value)}"\n')
        yield ["-c", f"include.path={path}"]
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _take_from_environment() -> None:
    """The environment's token held in memory, and taken out of the environment: its value
    zeroed in the block /proc/<pid>/environ shows (the strings the kernel copied at exec,
    which removing a variable from `os.environ` leaves as they were), then removed."""
    _HELD.token = os.environ.get("GITHUB_TOKEN") or os.environ.get("INPUT_GITHUB_TOKEN")
    names = {name for name in _ENVIRONMENT_TOKENS if name in os.environ}
    _blank_values(names)
    for name in names:
        del os.environ[name]


def _blank_values(names: set[str]) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        stat = Path("/proc/self/stat").read_bytes()
        start = int(stat[stat.rfind(b")") + 2 :].split()[47])  # field 50: env_start
        block = Path("/proc/self/environ").read_bytes()
    except (OSError, ValueError, IndexError):
        return
    import ctypes

    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and value and name.decode("utf-8", "replace") in names:
            # `NAME=` stays: libc's unsetenv (del os.environ) still finds the entry by name
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1


def held_secrets() -> tuple[str, ...]:
    """What must be masked wherever imm writes untrusted output."""
    if not _HELD.token:
        return ()
    basic = base64.b64encode(f"x-access-token:{_HELD.token}".encode()).decode()
    return (_HELD.token, basic)


def not_dumpable() -> None:
    """No core dump, no /proc/<pid>/mem or environ, no ptrace for this process's own user."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
