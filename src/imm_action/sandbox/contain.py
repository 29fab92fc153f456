"""Starting untrusted commands (executors, `lane_setup`, descriptors) so that ending them ends
every process they started (SPEC §8; decisions 0011, 0048).

In the sandbox (confine.py), the command's PID namespace does it: when the command ends, or
bwrap is killed, the kernel ends every process of the namespace. Unconfined (`sandbox: none`,
or a kernel without namespaces), each command runs under `reaper.py` in a session of its own: the
reaper is a child subreaper, so a descendant that calls `setsid` or double-forks is still its to
kill. `end` asks the command to stop (SIGTERM) and, should it not exit in time, kills its group.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from imm_action.sandbox.confine import Confined

REAPER = Path(__file__).with_name("reaper.py")
END_GRACE_S = 5.0

_Stream = int | IO[bytes] | IO[str] | None


def start_contained(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout: _Stream,
    stderr: _Stream = subprocess.STDOUT,
    stdin: _Stream = subprocess.DEVNULL,
    confined: Confined | None = None,
) -> subprocess.Popen[bytes]:
    """`argv` in a new session, in the sandbox when `confined` (a PID namespace of its own is
    then the reaper), else under a reaper; stdin is /dev/null unless given, no shell."""
    if confined is not None and confined.confinement.active:
        command = confined.command(argv, env)
    else:
        # -I: no user site or PYTHON* variables of the untrusted environment; -S: no site
        command = [sys.executable, "-I", "-S", str(REAPER), *argv]
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        close_fds=True,
    )


def wait_contained(process: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """The command's exit code once it ended, None when `timeout_s` passed first. Woken the
    moment it ends (a pidfd): `Popen.wait(timeout)` polls, up to 50 ms late each time, and a
    lane's end is on every dependency hop's path."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: Popen's own polling
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            poller.poll(max(1, int(remaining * 1000)))
    finally:
        os.close(pidfd)
    return process.returncode


def end(process: subprocess.Popen[bytes], grace_s: float = END_GRACE_S) -> int:
    """End a contained command and everything it started; its exit code (143 when stopped)."""
    if process.poll() is None:
        # PermissionError: a command started through sudo may run as root (a stand-in that
        # execs, or a sudo that changed its real uid); ending on its own, it is waited for
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.send_signal(signal.SIGTERM)
        code = wait_contained(process, grace_s)
        if code is not None:
            return code
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()
