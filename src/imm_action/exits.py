"""Errors to exit codes (SPEC §6): the one place a command's failure becomes what a person reads.

Expected failures (`ImmError`) print one message and exit with their code; Ctrl-C exits 130; any
other exception is a bug: its traceback goes to a log file and the message names that file.
"""

from __future__ import annotations

import os
import select
import tempfile
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    ImmError,
    InputError,
)


def run_guarded(
    command: str,
    body: Callable[[CommandIO], int],
    io: CommandIO,
    crash_dir: Path | None = None,
    *,
    annotate: bool = False,
) -> int:
    """Run one command; expected errors, Ctrl-C and crashes become exit codes.

    `crash_dir` is where a crash's traceback is written (the CLI passes `RUNNER_TEMP` on GitHub);
    by default the system's temporary directory. With `annotate` (a GitHub Actions step), each
    problem of an input error is also an annotation at its file and line.
    """
    try:
        return body(io)
    except ImmError as error:
        io.warn(f"imm {command}: {error}" if "\n" not in str(error) else str(error))
        if annotate and isinstance(error, InputError):
            from imm_action.actions.runtime import annotation

            for problem in error.problems:
                io.say(annotation(problem))
        return error.exit_code
    except KeyboardInterrupt:
        io.warn(f"imm {command}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError as error:
        if _reader_gone(io):
            return EXIT_BROKEN_PIPE  # `imm status | head -1`: nobody wants the rest
        return _crashed(command, error, io, crash_dir)
    except Exception as error:  # the one place an unexpected error is reported, with a log
        return _crashed(command, error, io, crash_dir)


def _crashed(command: str, error: Exception, io: CommandIO, crash_dir: Path | None) -> int:
    try:
        log = str(write_crash_log(command, crash_dir or Path(tempfile.gettempdir())))
    except OSError as failed:  # a name someone took first: the traceback goes to stderr
        log = f"no file ({failed.strerror}):\n{traceback.format_exc()}"
    io.warn(f"imm {command}: unexpected error: {error!r}; details in {log}")
    return EXIT_UNEXPECTED


def _reader_gone(io: CommandIO) -> bool:
    """Whether the broken pipe is our own output's (not, say, a git helper's): a pipe whose
    readers are all gone polls as an error."""
    try:
        fd = io.out.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def write_crash_log(command: str, directory: Path) -> Path:
    """The current exception's traceback, in a file named for the command, time and process."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = directory / f"imm-{command}-{stamp}-{os.getpid()}.log"
    # made here, never followed: a link or file someone planted at the name fails the write
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(traceback.format_exc())
    return path
