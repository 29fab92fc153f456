"""Typed git failures: callers decide on retry/abort by type, never by parsing stderr.

Only `GitAuthFailure` is a failure a person fixes (a wrong or expired token): it is an `ImmError`
that exits 2 with one line. Every other `GitError` that reaches the top is unexpected (exit 3,
traceback in the log file); `GitRetriable` is retried by the runner before it gets there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from imm_action.errors import EXIT_INVALID_INPUT, ImmError

# `scheme://user:secret@host` → `scheme://host`: a URL in a message never carries a credential.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s']+@")


def redact(text: str) -> str:
    return _USERINFO.sub(r"\g<scheme>", text)


class GitError(Exception):
    """A git command failed; carries what ran (secrets redacted), git's exit code (`None`: timed
    out) and its stderr."""

    def __init__(self, command: Sequence[str], returncode: int | None, stderr: str) -> None:
        self.command = tuple(redact(arg) for arg in command)
        self.returncode = returncode
        self.stderr = redact(stderr)
        detail = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else "no message"
        code = "timed out" if returncode is None else f"exit {returncode}"
        super().__init__(f"git {' '.join(self.command)} failed ({code}): {detail}")


class GitConflict(GitError):
    """The repository is not in the state the command expected (lost lease, merge conflict)."""


class GitRetriable(GitError):
    """A passing failure (network, a server's 5xx, lock contention, a remote call timing out):
    git did not do the operation, and the same call may succeed later."""


class GitFatal(GitError):
    """Anything else: a bug, a corrupt repository, a missing object."""


class GitAuthFailure(GitError, ImmError):
    """The remote refused our credentials (or asked for some we did not give)."""

    exit_code = EXIT_INVALID_INPUT

    def __init__(
        self, command: Sequence[str], returncode: int | None, stderr: str, remote: str | None
    ) -> None:
        super().__init__(command, returncode, stderr)
        self.remote = remote
        url = _failing_url(self.stderr)
        where = " ".join(part for part in (remote, f"({url})" if url else None) if part)
        self.message = (
            f"git could not authenticate to the remote {where or '(unknown)'}: check the token "
            "(GITHUB_TOKEN or the credentials in the repository's git config)"
        )

    def __str__(self) -> str:
        return self.message


class GitPushRefused(GitError, ImmError):
    """The remote itself refused a ref update — a pre-receive hook, branch protection or a push
    rule — not a lost race: another attempt would be refused the same way."""

    exit_code = EXIT_INVALID_INPUT

    def __init__(
        self, command: Sequence[str], returncode: int | None, stderr: str, refused: dict[str, str]
    ) -> None:
        super().__init__(command, returncode, stderr)
        self.refused = refused
        which = "; ".join(f"{ref}: {why}" for ref, why in sorted(refused.items()))
        said = [
            line[8:].strip() for line in self.stderr.splitlines() if line.startswith("remote: ")
        ]
        words = f"; the remote said: {' / '.join(said[:3])}" if any(said) else ""
        self.message = (
            f"the remote refused to update {which}{words} — imm must be allowed to push imm/* "
            "branches and refs/imm/* (branch protection, a push rule or a hook refused it)"
        )

    def __str__(self) -> str:
        return self.message


# git names the URL it failed on in quotes: "Authentication failed for 'URL'", "for 'URL': ...".
_QUOTED_URL = re.compile(r"'(?P<url>[a-zA-Z][a-zA-Z0-9+.-]*://[^'\s]+)'")


def _failing_url(stderr: str) -> str | None:
    found = _QUOTED_URL.search(stderr)
    return found.group("url") if found else None
