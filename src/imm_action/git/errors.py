"""Typed git failures: callers decide on retry/abort by type, never by parsing stderr."""

from __future__ import annotations

from collections.abc import Sequence


class GitError(Exception):
    """A git command failed; carries what ran (with secrets redacted), its exit code and stderr."""

    def __init__(self, command: Sequence[str], exit_code: int | None, stderr: str) -> None:
        self.command = tuple(command)
        self.exit_code = exit_code
        self.stderr = stderr
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        code = "timed out" if exit_code is None else f"exit {exit_code}"
        super().__init__(f"git {' '.join(self.command)} failed ({code}): {detail}")


class GitConflict(GitError):
    """The repository is not in the state the command expected (lost lease, merge conflict)."""


class GitRetriable(GitError):
    """A passing failure (timeout, network, lock contention): the same call may succeed later."""


class GitAuthFailure(GitError):
    """The remote refused our credentials."""


class GitFatal(GitError):
    """Anything else: a bug, a corrupt repository, a missing object."""
