"""The reaper: runs one untrusted command and leaves none of its processes behind.

Started by imm as `python -I -S reaper.py <argv...>` in a session of its own (see contain.py). It
makes itself a *child subreaper* (Linux `prctl(PR_SET_CHILD_SUBREAPER)`), so every descendant of
the command that loses its parent — including one that called `setsid` to escape its session —
is re-parented to the reaper instead of to init. When the command exits, or the reaper is told to
stop (SIGTERM/SIGINT/SIGHUP, or its parent died: `PR_SET_PDEATHSIG`), it kills every process of
its session and every child it has, reaps them, and repeats until none is left; then it exits with
the command's code (143 when stopped).

Deliberately standalone: only `os`, `sys`, `_signal` and (on Linux) `ctypes` are imported, so it
starts in ~10-20 ms; it imports nothing of imm.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C core: no enum import
import os
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SIGHUP, SIGINT, SIGKILL, SIGTERM = 1, 2, 9, 15
STOPPED = 128 + SIGTERM
_SETTLE_S = 0.005


class _Stop(BaseException):
    pass


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def _become_subreaper() -> bool:
    """Subreaper, and SIGTERM when the process that started us dies. False off Linux."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ok: bool = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    libc.prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0)
    return ok


def _start(argv: list[str]) -> int:
    pid = os.fork()
    if pid == 0:  # the command: default signal handling, then exec
        try:
            for sig in (SIGHUP, SIGINT, SIGTERM):
                _signal.signal(sig, _signal.SIG_DFL)
            os.setpgid(0, 0)  # its own group in our session: one killpg ends it
            os.execvp(argv[0], argv)
        except OSError as error:
            os.write(2, f"imm: cannot start {argv[0]}: {error.strerror}\n".encode())
        finally:
            os._exit(127)
    return pid


def _wait_for(pid: int) -> int:
    """Reap whatever ends (orphans re-parented to us too) until the command itself ends."""
    while True:
        done, status = os.wait()
        if done == pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def _ours() -> list[int]:
    """Every other process of our session, and every child of ours (orphans that left it)."""
    me = os.getpid()
    session = os.getsid(0)
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # fields after the command name (which may hold spaces and parentheses)
        fields = stat[stat.rfind(b")") + 2 :].split()
        parent, sid = int(fields[1]), int(fields[3])
        if parent == me or sid == session:
            found.append(int(name))
    return found


def _reap_all() -> bool:
    """Reap every ended child; whether any child is left."""
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if done == 0:
            return True


def _end_everything(command: int) -> None:
    """SIGKILL the command's group, our session and our children until nothing is left.

    As a subreaper, once the command is gone every descendant still alive has a chain of
    living parents up to us: no child left means no descendant left (the common case, which
    needs no look at /proc)."""
    try:  # noqa: SIM105 - contextlib would cost start-up time here
        os.killpg(command, SIGKILL)
    except OSError:
        pass
    if not _reap_all():
        return
    while True:
        victims = _ours()
        for pid in victims:
            try:  # noqa: SIM105 - as above
                os.kill(pid, SIGKILL)
            except OSError:
                pass
        if not _reap_all() and not victims:
            return
        time.sleep(_SETTLE_S)


def main(argv: list[str]) -> int:
    if not argv:
        return 127
    parent = os.getppid()
    for sig in (SIGHUP, SIGINT, SIGTERM):
        _signal.signal(sig, _stop)
    try:
        _become_subreaper()
        if os.getppid() != parent:
            return STOPPED  # imm died before we could watch for it
        command = _start(argv)
        try:
            code = _wait_for(command)
        finally:
            for sig in (SIGHUP, SIGINT, SIGTERM):
                _signal.signal(sig, _signal.SIG_IGN)
            _end_everything(command)
    except _Stop:
        return STOPPED
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
