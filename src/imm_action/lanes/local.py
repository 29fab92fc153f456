"""Local lanes (SPEC §5.2 step 4): lane processes on this machine, behind `LaneRunners`.

A local lane's runner records the pid of the coordinator (`imm run`) that owns it and the path
of its log. The coordinator's own lanes are finished when it saw their process exit. A lane
owned by another coordinator that is gone was orphaned by that death — a SIGKILL of `imm run`
takes its lanes along — so it is started again without counting an attempt."""

from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Protocol

from imm_action.errors import EXIT_INTERRUPTED
from imm_action.lanes.runners import (
    FinishedWithOutcome,
    FinishedWithoutOutcome,
    LaneAtWork,
    LaneStart,
    Orphaned,
    RunnerReport,
    Running,
)
from imm_action.model.state import GithubRunner, LocalRunner, Runner
from imm_action.sandbox.leftovers import pid_alive

STOP_GRACE_S = 10.0


class LaneProcess(Protocol):
    """A running lane, whichever way it was started."""

    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class LaneLauncher(Protocol):
    """Starts `imm lane` for one admitted lane, writing its output to `log`."""

    def __call__(self, batch_id: str, task_id: str, log: Path) -> LaneProcess: ...


class ForkedLane:
    """A lane forked from the coordinator: it inherits the imports already loaded, so a lane
    starts in milliseconds instead of the ~0.2 s a fresh interpreter needs. It stays in the
    coordinator's process group: a Ctrl-C or a kill of `imm run` ends its lanes too."""

    def __init__(self, target: Callable[[], int]) -> None:
        context = multiprocessing.get_context("fork")
        # A Ctrl-C during the fork raised in the child's at-fork handlers (a stray traceback)
        # or in the parent before it held the child (a lane nobody ended, which kept the run's
        # stderr open): both wait until the child is known (issue 41 #7).
        with _signals_deferred() as deferred, frozen_heap():
            self._process = context.Process(
                target=_exit_with, args=(target, deferred), daemon=False
            )
            self._process.start()
            pid = self._process.pid
            if pid is None:
                raise OSError("the lane process did not start")
            self.pid = pid
            FORKED.add(self)

    def poll(self) -> int | None:
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(["imm lane"], timeout or 0)
        return self._process.exitcode

    def kill(self) -> None:
        self._process.kill()

    @property
    def sentinel(self) -> int:
        """Ready to read once the lane ended: what the coordinator waits on."""
        return self._process.sentinel


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Around a fork: what the child inherits is frozen in it (`gc.freeze`), so its collector
    never walks the parent's objects, never writes their headers and so never copies the
    parent's memory page by page (copy-on-write); the parent takes them back at once."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


# Every lane forked by this process, from the moment it exists until it is reaped: one a
# Ctrl-C caught between its fork and its registration by `LocalLanes` is still ended by
# `stop_all` (held strongly: nothing else may hold it).
FORKED: set[ForkedLane] = set()
_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)
Handler = Callable[[int, FrameType | None], object] | int | None


@dataclass
class _Deferred:
    """Stands in for the handlers of SIGINT and SIGTERM while a lane forks: a signal that comes
    is noted (Python runs handlers in the main thread, whichever thread the kernel chose —
    a per-thread mask would not hold it) and handled once the lane is known."""

    before: dict[int, Handler]
    caught: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.caught = self.caught or signum

    def restore(self) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)

    def deliver(self) -> None:
        """What the noted signal would have done (KeyboardInterrupt, imm run's Terminated)."""
        caught, self.caught = self.caught, None
        if caught is None:
            return
        handler = self.before.get(caught)
        if callable(handler):
            handler(caught, None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), caught)


_ACTIVE: list[_Deferred] = []  # the deferral under way in this process, if any


def _restore_in_child() -> None:
    """Right after the fork, in the child: its own handlers back before any of its code runs
    (a child stuck in an inherited lock must still end on SIGINT); a signal noted before the
    fork is handled by `_exit_with`."""
    for deferred in _ACTIVE:
        deferred.restore()


os.register_at_fork(after_in_child=_restore_in_child)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[_Deferred | None]:
    if threading.current_thread() is not threading.main_thread():
        yield None  # only the main thread may set handlers; only it gets their exceptions
        return
    deferred = _Deferred({sig: signal.getsignal(sig) for sig in _HELD_SIGNALS})
    for sig in _HELD_SIGNALS:
        signal.signal(sig, deferred)
    _ACTIVE.append(deferred)
    try:
        yield deferred
    finally:
        _ACTIVE.remove(deferred)
        deferred.restore()
        deferred.deliver()


def _exit_with(target: Callable[[], int], deferred: _Deferred | None) -> None:
    # A Ctrl-C reaches the lanes too (one process group). One that lands before the lane's
    # own handling starts (opening its log) ends it as that would — exit 130, no traceback on
    # the person's terminal from multiprocessing (issue 41 #7). The fork deferred the signals:
    # the handlers come back here, and one noted meanwhile is handled inside the handling.
    try:
        if deferred is not None:
            deferred.restore()
            deferred.deliver()
        code = target()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    sys.exit(code)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


@dataclass
class RunningLane:
    task_id: str
    process: LaneProcess
    log: Path
    started: float


def spend_file_of(log: Path) -> Path:
    """Where a local lane keeps what its agent spent so far: beside its log (issue 45)."""
    return log.with_name(log.name + ".spend")


class LocalLanes:
    """`LaneRunners` for lanes on this machine. Without a launcher it only watches (a pass of
    `imm reconcile` or `imm retry` run by hand): admitted lanes wait for `imm lane`."""

    def __init__(
        self,
        own_pid: int,
        launcher: LaneLauncher | None = None,
        log_dir: Path | None = None,
        on_event: Callable[[str], None] = lambda line: None,
    ) -> None:
        self._own_pid = own_pid
        self._launcher = launcher
        self._log_dir = log_dir
        self._on_event = on_event
        self.run_id = uuid.uuid4().hex[:8]
        self.running: dict[str, RunningLane] = {}
        self.exited: set[str] = set()  # log paths of our lanes whose process ended

    def runner_for(self, task_id: str) -> Runner:
        if self._launcher is None or self._log_dir is None:
            return LocalRunner(path=f"(lane {task_id} not started)", pid=None)
        log = self._log_dir / f"{task_id}-{self.run_id}-{uuid.uuid4().hex[:6]}.log"
        return LocalRunner(path=str(log), pid=self._own_pid)

    def start(self, lanes: Sequence[LaneStart]) -> None:
        if self._launcher is None:
            return
        for lane in lanes:
            runner = lane.runner
            if lane.task_id in self.running or not isinstance(runner, LocalRunner):
                continue
            if runner.pid != self._own_pid:
                continue  # another coordinator's lane, or one for `imm lane` by hand
            log = Path(runner.path)
            process = self._launcher(lane.batch_id, lane.task_id, log)
            self.running[lane.task_id] = RunningLane(lane.task_id, process, log, time.monotonic())
            self._on_event(f"lane {lane.task_id} started (log: {log})")

    def in_flight_usd(self) -> float:
        """What the running lanes' agents spent so far, as each lane last wrote it. A lane
        whose process ended is left out: its outcome, which the pass takes, counts it."""
        total = 0.0
        for lane in self.running.values():
            if lane.process.poll() is not None:
                continue
            with contextlib.suppress(OSError, ValueError):
                spent = float(spend_file_of(lane.log).read_text(encoding="utf-8"))
                total += spent if math.isfinite(spent) and spent > 0 else 0.0
        return total

    def reports(self, lanes: Sequence[LaneAtWork]) -> Mapping[str, RunnerReport]:
        return {lane.task_id: self._report(lane.runner, lane.has_outcome) for lane in lanes}

    def _report(self, runner: Runner, has_outcome: bool) -> RunnerReport:
        match runner:
            case LocalRunner(pid=None) | GithubRunner():
                return Running()
            case LocalRunner(pid=pid, path=path) if pid == self._own_pid:
                if path not in self.exited:
                    return Running()
                return FinishedWithOutcome() if has_outcome else FinishedWithoutOutcome("exited")
            case LocalRunner(pid=pid) if pid is not None and pid_alive(pid):
                return Running()
            case LocalRunner():
                return FinishedWithOutcome() if has_outcome else Orphaned()

    def reap(self) -> list[tuple[RunningLane, int]]:
        """The lanes whose process ended since the last look, with their exit codes."""
        ended: list[tuple[RunningLane, int]] = []
        for lane in list(self.running.values()):
            code = lane.process.poll()
            if code is None:
                continue
            del self.running[lane.task_id]
            if isinstance(lane.process, ForkedLane):
                FORKED.discard(lane.process)
            self.exited.add(str(lane.log))
            ended.append((lane, code))
        return ended

    def sentinels(self) -> list[int] | None:
        """What becomes ready when a running lane ends; None when a lane was started some way
        that gives none (the coordinator then looks every few milliseconds)."""
        found = [getattr(lane.process, "sentinel", None) for lane in self.running.values()]
        return [handle for handle in found if handle is not None] if None not in found else None

    def stop_some(self, task_ids: Iterable[str]) -> None:
        """Ask the running lanes of `task_ids` to end (SIGINT); `reap` collects them."""
        for task_id in task_ids:
            lane = self.running.get(task_id)
            if lane is not None and lane.process.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    lane.process.send_signal(signal.SIGINT)

    def stop_all(self) -> None:
        """End every running lane: SIGINT first, SIGKILL after a grace period. A lane forked
        but never registered (a Ctrl-C came between) is ended too."""
        held = {id(lane.process) for lane in self.running.values()}
        for stray in [lane for lane in FORKED if id(lane) not in held]:
            with contextlib.suppress(OSError, ValueError, subprocess.TimeoutExpired):
                if stray.poll() is None:
                    stray.send_signal(signal.SIGINT)
                    stray.wait(timeout=STOP_GRACE_S)
            if stray.poll() is None:
                stray.kill()
            FORKED.discard(stray)
        for lane in self.running.values():
            if lane.process.poll() is None:
                lane.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_S
        for lane in self.running.values():
            try:
                lane.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                lane.process.kill()
                lane.process.wait()
        self.running.clear()
