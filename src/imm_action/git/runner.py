"""The one place that starts git: a timeout on every call, typed errors, no hooks, no signing."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
)  # fmt: skip

# stderr patterns, checked in order, that tell which kind of failure a git call had.
_CLASSIFIERS: tuple[tuple[re.Pattern[str], type[GitError]], ...] = (
    (re.compile(r"Authentication failed|could not read Username|403 Forbidden|401"),
     GitAuthFailure),
    (re.compile(r"stale info|cannot lock ref|reference already exists|is at [0-9a-f]+ but expected"
                r"|non-fast-forward|fetch first|failed to update ref|\[rejected\]"), GitConflict),
    (re.compile(r"Could not resolve host|Connection (reset|refused|timed out)|early EOF"
                r"|the remote end hung up|Unable to create .*\.lock|index\.lock"), GitRetriable),
)  # fmt: skip


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
    ) -> None:
        self.repo = repo
        self._env = dict(env or {})
        self._timeout_s = timeout_s

    def run(
        self,
        args: Sequence[str],
        *,
        input_text: str | None = None,
        ok_codes: tuple[int, ...] = (0,),
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> GitResult:
        """Run `git <args>`; an exit code outside `ok_codes` raises the matching GitError."""
        argv = ["git", *_SAFE_CONFIG, *args]
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
            )
        except subprocess.TimeoutExpired as expired:
            raise GitRetriable(args, None, _text(expired.stderr)) from None
        except FileNotFoundError as missing:
            raise GitFatal(args, None, f"cannot run git: {missing}") from None
        if done.returncode not in ok_codes:
            raise classify(args, done.returncode, done.stderr)
        return GitResult(done.returncode, done.stdout, done.stderr)

    def run_bytes(self, args: Sequence[str], input_text: str) -> bytes:
        """`git <args>` whose output is binary (e.g. `cat-file --batch`)."""
        try:
            done = subprocess.run(
                ["git", *_SAFE_CONFIG, *args],
                cwd=self.repo,
                input=input_text.encode("utf-8", "surrogateescape"),
                capture_output=True,
                env=self._environment(None),
                timeout=self._timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            raise GitRetriable(args, None, _text(expired.stderr)) from None
        if done.returncode != 0:
            raise classify(args, done.returncode, _text(done.stderr))
        return done.stdout

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
        base.update(self._env)
        if extra:
            base.update(extra)
        return base


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


def classify(args: Sequence[str], exit_code: int, stderr: str) -> GitError:
    for pattern, kind in _CLASSIFIERS:
        if pattern.search(stderr):
            return kind(args, exit_code, stderr)
    return GitFatal(args, exit_code, stderr)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")
