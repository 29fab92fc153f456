"""The one place that starts git: a timeout on every call, typed errors, no hooks, no signing."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from imm_action import credentials
from imm_action.git.errors import (
    GitAuthFailure,
    GitConflict,
    GitError,
    GitFatal,
    GitRetriable,
)

DEFAULT_TIMEOUT_S = 120.0

# Config every call of ours runs with: no git call of imm's ever runs a program a repository's
# config names — no hooks (`/dev/null` is no folder, so no hook is found; an empty folder in a
# shared temp dir could be filled by someone else first), no fsmonitor, no `ext::` transport —
# and our own commits never ask for a key. (SPEC §8, issue 12)
_SAFE_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "core.quotePath=false",
    # No background `gc --auto`/maintenance from our calls: it would pack and prune refs while
    # other writers hold their locks (see GitRepo.refs_locked).
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)  # fmt: skip

# Which kind of failure a git call had, read from git's own messages (git 2.39+: `die()` lines
# start with "fatal: " and exit 128; curl's reason follows "unable to access '<url>': "; what a
# server prints comes through as "remote: "). Patterns are anchored to those lines, so a ref,
# path or object name that happens to contain "401" or "rejected" is never read as one.
_AUTH = re.compile(
    r"^fatal: Authentication failed for '"
    r"|^fatal: could not read (Username|Password) for '"  # with GIT_TERMINAL_PROMPT=0
    r"|^fatal: unable to access '[^']*': The requested URL returned error: 40[13]\s*$"
    r"|^remote: (Invalid username or password|Permission to \S+ denied to )"
    r"|^\S+: Permission denied \(publickey",  # ssh
    re.MULTILINE,
)  # fmt: skip
_CONFLICT = re.compile(
    r"^(fatal|error): cannot lock ref '"  # update-ref: "is at X but expected Y", "already exists"
    r"|\[(remote )?rejected\]",  # push; '[' cannot occur in a ref name
    re.MULTILINE,
)  # fmt: skip
_TRANSIENT = re.compile(
    r"^fatal: unable to access '[^']*': (Could not resolve (host|proxy)|Failed to connect to"
    r"|Connection (refused|reset|timed out)|Operation timed out|Recv failure|Send failure"
    r"|Empty reply from server|The requested URL returned error: (5\d\d|429)"
    r"|OpenSSL SSL_|GnuTLS|SSL_ERROR|HTTP/2 stream)"
    r"|^error: RPC failed"
    r"|^fatal: [Tt]he remote end hung up unexpectedly"
    r"|^fatal: early EOF"
    r"|^ssh: Could not resolve hostname"
    r"|^(kex_exchange_identification: )?Connection (closed|reset) by"
    r"|^fatal: Unable to create '[^']*\.lock': File exists",  # another git holds the lock
    re.MULTILINE,
)  # fmt: skip
# Commands that talk to a remote: their remote is named in an auth failure, and a timeout is a
# passing failure (the network), not a hang of ours.
_REMOTE_COMMANDS = frozenset({"fetch", "push", "ls-remote", "pull", "clone"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often a passing failure (`GitRetriable`) is tried again: exponential backoff with
    jitter, bounded by attempts."""

    attempts: int = 4
    first_wait_s: float = 0.5
    max_wait_s: float = 8.0


@dataclass(frozen=True)
class GitResult:
    exit_code: int
    stdout: str
    stderr: str


class GitRunner:
    """Runs git in one repository. `env` replaces nothing: it adds to a minimal fixed base."""

    def __init__(
        self,
        repo: Path,
        *,
        env: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
        wrapper: Sequence[str] = (),
    ) -> None:
        self.repo = repo
        # what git runs inside (a mount namespace that shows an overlay tree, overlays.py)
        self._wrapper = tuple(wrapper)
        self._env = dict(env or {})
        self._timeout_s = timeout_s
        self._retry = retry

    def run(
        self,
        args: Sequence[str],
        *,
        input_text: str | None = None,
        ok_codes: tuple[int, ...] = (0,),
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        umask: int = -1,
    ) -> GitResult:
        """Run `git <args>`; an exit code outside `ok_codes` raises the matching GitError.
        `umask`: the file mode mask git creates files with (-1: this process's).

        A passing failure of a call to a remote (network, a server's 5xx) is tried again as the
        retry policy says, each retry logged; the last one raises `GitRetriable`."""

        def attempt() -> GitResult:
            return self._run_once(args, input_text, ok_codes, env, timeout_s, umask=umask)

        try:
            return attempt()
        except GitRetriable as first:
            if not _remote_command(args):
                # A held lock in a local call is the caller's race to resolve (the pass re-runs
                # on fresh facts; `imm run` owns its worktrees): waiting here only delays it.
                raise
            return _retried(attempt, first, self._retry)

    def _run_once(
        self,
        args: Sequence[str],
        input_text: str | None,
        ok_codes: tuple[int, ...],
        env: Mapping[str, str] | None,
        timeout_s: float | None,
        *,
        umask: int = -1,
    ) -> GitResult:
        with _git_argv(args) as bare:
            argv = [*self._wrapper, *bare]
            try:
                done = subprocess.run(
                    argv,
                    cwd=self.repo,
                    input=input_text,
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    errors="surrogateescape",
                    env=self._environment(env),
                    timeout=timeout_s or self._timeout_s,
                    check=False,
                    umask=umask,
                )
            except subprocess.TimeoutExpired as expired:
                kind = GitRetriable if _remote_command(args) else GitFatal
                raise kind(args, None, _text(expired.stderr)) from None
            except FileNotFoundError as missing:
                raise GitFatal(args, None, f"cannot run git: {missing}") from None
        if done.returncode not in ok_codes:
            raise classify(args, done.returncode, done.stderr)
        return GitResult(done.returncode, done.stdout, done.stderr)

    def run_bytes(self, args: Sequence[str], input_text: str) -> bytes:
        """`git <args>` whose output is binary (e.g. `cat-file --batch`)."""
        data = input_text.encode("utf-8", "surrogateescape")
        return self._completed(args, GitRetriable, data=data).stdout

    def run_reading(self, args: Sequence[str], source: BinaryIO) -> GitResult:
        """`git <args>` reading its input from an open file, from where it stands (e.g. the
        pack inside a bundle, for `index-pack --stdin`)."""
        done = self._completed(args, GitFatal, stdin=source)
        return GitResult(done.returncode, _text(done.stdout), _text(done.stderr))

    def _completed(
        self,
        args: Sequence[str],
        timed_out: type[GitError],
        *,
        data: bytes | None = None,
        stdin: BinaryIO | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """`git <args>` run to its end, its output kept as bytes; a failure raised as git's."""
        with _git_argv(args) as bare:
            argv = [*self._wrapper, *bare]
            try:
                done = subprocess.run(
                    argv,
                    cwd=self.repo,
                    input=data,
                    stdin=stdin,
                    capture_output=True,
                    env=self._environment(None),
                    timeout=self._timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as expired:
                raise timed_out(args, None, _text(expired.stderr)) from None
        if done.returncode != 0:
            raise classify(args, done.returncode, _text(done.stderr))
        return done

    def spawn(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """A long-lived git process talking over pipes (e.g. `cat-file --batch`)."""
        return subprocess.Popen(
            ["git", *_SAFE_CONFIG, *args],
            cwd=self.repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self._environment(None),
        )

    def output(
        self,
        args: Sequence[str],
        *,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        return self.run(args, input_text=input_text, env=env).stdout

    def _environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        base = {key: value for key, value in os.environ.items() if _inherited(key)}
        base.update(
            GIT_TERMINAL_PROMPT="0",
            GIT_CONFIG_NOSYSTEM="1",
            LC_ALL="C",
        )
        base[IMM_GIT_MARK] = "1"  # a git of imm's own, not the user's (GitRepo.refs_locked)
        base.update(self._env)
        if extra:
            base.update(extra)
        return base


# In the environment of every git imm runs: what tells imm's own gits from the user's when a
# lock file of git's is found in the way.
IMM_GIT_MARK = "IMM_ACTION_GIT"

# Only what git needs to find itself, its config and the user's identity; never tokens.
_INHERITED = frozenset(
    {
        "PATH", "HOME", "TMPDIR", "GIT_CONFIG_GLOBAL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_EXEC_PATH", "SSH_AUTH_SOCK",
    }
)  # fmt: skip


# Config given to this process through the environment (SPEC §8: a token reaches git as an
# `http.<server>/.extraheader` in GIT_CONFIG_* variables, never in argv or a repository's config).
_CONFIG_ENV = re.compile(r"GIT_CONFIG_(COUNT|KEY_[0-9]+|VALUE_[0-9]+)")


def _inherited(key: str) -> bool:
    return key in _INHERITED or _CONFIG_ENV.fullmatch(key) is not None


def classify(args: Sequence[str], returncode: int, stderr: str) -> GitError:
    """The typed error of a git call that failed with `returncode` and printed `stderr`."""
    if returncode == 128 and _AUTH.search(stderr):
        return GitAuthFailure(args, returncode, stderr, _remote_of(args))
    if _CONFLICT.search(stderr):
        return GitConflict(args, returncode, stderr)
    if _TRANSIENT.search(stderr):
        return GitRetriable(args, returncode, stderr)
    return GitFatal(args, returncode, stderr)


@contextlib.contextmanager
def _git_argv(args: Sequence[str]) -> Iterator[list[str]]:
    """`git <args>` with imm's safe config; a network command also gets the token's header,
    from a 0600 file that lives as long as the block, never from its environment
    (credentials.py)."""
    if not _remote_command(args):
        yield ["git", *_SAFE_CONFIG, *args]
        return
    with credentials.git_config_file() as auth:
        yield ["git", *_SAFE_CONFIG, *auth, *args]


def _remote_command(args: Sequence[str]) -> bool:
    return next((arg for arg in args if not arg.startswith("-")), None) in _REMOTE_COMMANDS


def _remote_of(args: Sequence[str]) -> str | None:
    """The remote a fetch/push/ls-remote names: its first argument that is not an option."""
    words = [arg for arg in args if not arg.startswith("-")]
    if len(words) < 2 or words[0] not in _REMOTE_COMMANDS:
        return None
    return words[1]


def _retried(
    attempt: Callable[[], GitResult], first: GitRetriable, policy: RetryPolicy
) -> GitResult:
    """Try `attempt` again after a passing failure, logging each retry; tenacity and logging are
    imported only here, on the failure path, so a command's start stays fast (ADR 0003)."""
    import logging

    from tenacity import (
        RetryCallState,
        Retrying,
        retry_if_exception_type,
        stop_after_attempt,
        wait_exponential,
        wait_random,
    )

    log = logging.getLogger("imm_action.git")

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s; trying again in %.1f s (attempt %d of %d)",
            error, wait, state.attempt_number + 1, policy.attempts,
        )  # fmt: skip

    replay: list[GitRetriable] = [first]

    def again() -> GitResult:
        # The failure that brought us here is attempt 1: tenacity waits and logs it like the rest.
        if replay:
            raise replay.pop()
        return attempt()

    retrying = Retrying(
        stop=stop_after_attempt(max(policy.attempts, 1)),
        wait=wait_exponential(multiplier=policy.first_wait_s, max=policy.max_wait_s)
        + wait_random(0, policy.first_wait_s),
        retry=retry_if_exception_type(GitRetriable),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(again)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")
