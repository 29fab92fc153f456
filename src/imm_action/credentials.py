"""The token imm acts with, kept out of every environment (SPEC §8, decision 0033).

An environment is readable: `/proc/<pid>/environ` shows a process's first environment to any
process of its user for as long as it lives, and children inherit it. So the action hands imm
its token in a file only the runner's user can read (`IMM_TOKEN_FILE`, mode 0600), which imm
reads once, at its start, and removes. The token then lives in this module's memory only; git
gets the basic-auth header in `GIT_CONFIG_*` variables of the network commands that need it
(fetch, push, ls-remote), scoped to `IMM_GIT_SERVER`, and nothing else gets it. Holding it, the
process is made non-dumpable (`PR_SET_DUMPABLE` 0): another process of the same user can no
longer read its memory or environment through /proc or ptrace. A process imm forks keeps that;
one it starts (`exec`) does not, and gets no token.

Run by hand, imm still takes `GITHUB_TOKEN` from its environment (the user put it there)."""

from __future__ import annotations

import base64
import contextlib
import os
import sys
from dataclasses import dataclass

TOKEN_FILE = "IMM_TOKEN_FILE"
GIT_SERVER = "IMM_GIT_SERVER"
_PR_SET_DUMPABLE = 4
_ENVIRONMENT_TOKENS = ("GITHUB_TOKEN", "GH_TOKEN", "IMM_TOKEN", "INPUT_GITHUB_TOKEN")


@dataclass
class _Held:
    token: str | None = None
    server: str | None = None  # what the header is scoped to: scheme://host/


_HELD = _Held()


class CredentialError(Exception):
    """The token file cannot be read."""


def take_credentials() -> None:
    """At imm's start: the token file read and removed, and the process made non-dumpable
    when it now holds a token. Without a token file, whatever an earlier call took is
    forgotten (a test runs many commands in one process)."""
    path = os.environ.pop(TOKEN_FILE, None)
    _HELD.token = None
    _HELD.server = os.environ.get(GIT_SERVER)
    if not path:
        if any(os.environ.get(name) for name in _ENVIRONMENT_TOKENS):
            # a person's token in imm's own environment (run by hand): /proc shows it for
            # as long as imm lives; at least no other process of the user may read it there
            not_dumpable()
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
