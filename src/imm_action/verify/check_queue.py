"""One shared queue of checks for a verifier's workers (issue 31, decision 0049).

A stack's checks, and a bisection's probes over several trees, are pulled one at a time by
`workers` threads from a single queue ordered longest first (by each descriptor's last recorded
duration; one never timed goes first, as its cost is unknown). A worker holds one checkout at a
time and keeps it while the checks it pulls are of the same tree. No check is bound to a worker
by its position: a worker that is done pulls the next check, so none idles while others queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from imm_action.model.descriptor import DescriptorEnvironment, VerificationDescriptor
from imm_action.model.outcome import CheckResult
from imm_action.verify.command_run import Sandbox, run_check, run_command


class Queued(Protocol):
    @property
    def check_id(self) -> str: ...

    @property
    def descriptor(self) -> VerificationDescriptor: ...

    @property
    def digest(self) -> str: ...


@dataclass(frozen=True)
class QueuedCheck:
    tree: str
    check: Queued
    alone: frozenset[str] = frozenset()  # its tests to run alone (tests_alone.py)


@dataclass(frozen=True)
class Workers:
    """How many checks run at once: always up to `floor`; up to `ceiling` while a core sits
    idle (decision 0049). `verify_parallel: N` fixes both at N."""

    floor: int
    ceiling: int

    @classmethod
    def fixed(cls, count: int) -> Workers:
        return cls(count, count)


def default_workers(cores: int | None = None) -> Workers:
    """Workers when `verify_parallel` is not set: one per core, and up to four per core while
    cores sit idle. Checks that compute fill every core with one each, and then no more start;
    checks that wait (on a network, a database, a sleep) leave cores idle, and more start, so
    neither kind is held to a count chosen for the other (decision 0049)."""
    count = cores or os.cpu_count() or 1
    return Workers(count, 4 * count)


class IdleCores:
    """How many cores sat idle lately, from /proc/stat, sampled at most every `period` s (0
    where there is no /proc/stat: then no check starts beyond the floor)."""

    def __init__(self, period: float = 0.05, stat: Path = Path("/proc/stat")) -> None:
        self._period = period
        self._stat = stat
        self._lock = threading.Lock()
        self._last: tuple[float, int, int] | None = None
        self._idle = 0.0
        self._cpus = 1

    def __call__(self) -> float:
        with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last[0] < self._period:
                return self._idle
            sample = self._sample()
            if sample is None:
                return 0.0
            idle, total = sample
            if self._last is not None and total > self._last[2]:
                share = (idle - self._last[1]) / (total - self._last[2])
                self._idle = share * self._cpus
            self._last = (now, idle, total)
            return self._idle

    def _sample(self) -> tuple[int, int] | None:
        try:
            lines = self._stat.read_text(encoding="ascii").splitlines()
        except OSError:
            return None
        fields = lines[0].split() if lines else []
        if not fields or fields[0] != "cpu":
            return None
        # the CPUs the figures are of (a container may see the host's)
        self._cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
        ticks = [int(value) for value in fields[1:9]]
        return ticks[3] + ticks[4], sum(ticks)  # idle + iowait, of all


class Admission:
    """Lets a worker start its next check while fewer than `allowed` run. `allowed` starts at
    the floor (one per core). When half a core or more sat idle, it grows by one per idle core
    (at least one, up to the ceiling); when less than a tenth of a core did, it shrinks by one
    (down to the floor); each at most once per `ramp` s, so the idle figure has seen the last
    change take effect. A worker refused waits `poll` s and asks again."""

    def __init__(
        self,
        workers: Workers,
        idle: Callable[[], float],
        *,
        poll: float = 0.02,
        ramp: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        waiting: Callable[[], int] = lambda: 1 << 30,
    ) -> None:
        self._workers = workers
        self._waiting = waiting
        self._idle = idle
        self._poll = poll
        self._ramp = ramp
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = -ramp
        self.allowed = workers.floor
        self.running = 0

    def try_enter(self) -> bool:
        with self._lock:
            self._adjust()
            if self.running < self.allowed:
                self.running += 1
                return True
            return False

    def _adjust(self) -> None:
        if self._workers.ceiling == self._workers.floor:
            return
        now = self._clock()
        if now - self._changed < self._ramp:
            return
        idle = self._idle()
        # more workers only while as many checks wait as run: a worker's first check costs a
        # checkout of its tree, which a short queue does not pay back (a big repository)
        more = self.running >= self.allowed and self._waiting() >= self.running
        if idle >= 0.5 and self.allowed < self._workers.ceiling and more:
            # one more per idle core: checks that wait leave every core idle
            self.allowed = min(self._workers.ceiling, self.allowed + max(1, round(idle)))
            self._changed = now
        elif idle < 0.1 and self.allowed > self._workers.floor:
            self.allowed -= 1  # the cores are full: computing checks; let no more share them
            self._changed = now

    def enter(self) -> None:
        while not self.try_enter():
            time.sleep(self._poll)

    def leave(self) -> None:
        with self._lock:
            self.running -= 1


def longest_first(
    items: Sequence[QueuedCheck], duration_ms: Callable[[QueuedCheck], int | None]
) -> list[QueuedCheck]:
    """`items` in the order workers pull them: never timed first (its cost is unknown), then by
    recorded duration, longest first; ties keep their given order."""

    def key(indexed: tuple[int, QueuedCheck]) -> tuple[int, int, int]:
        index, item = indexed
        known = duration_ms(item)
        return (0, 0, index) if known is None else (1, -known, index)

    return [item for _, item in sorted(enumerate(items), key=key)]


def environment_of(check: Queued) -> tuple[str, DescriptorEnvironment]:
    environment = check.descriptor.environment or DescriptorEnvironment()
    return json.dumps(environment.model_dump(mode="json"), sort_keys=True), environment


@dataclass
class _Held:
    """A worker's checkout of one tree, its sandbox, what puts it back as taken, and the
    environments prepared in its current view."""

    tree: str
    sandbox: Sandbox
    close: contextlib.ExitStack
    fresh: Fresh
    prepared: dict[str, CheckResult | None] = field(default_factory=dict)
    used: bool = False  # a command ran in this view: the next check gets a fresh one


Fresh = Callable[[], None]
OpenSandbox = Callable[[str, contextlib.ExitStack], tuple[Sandbox, Fresh]]


def run_queue(
    items: Sequence[QueuedCheck],
    workers: Workers,
    open_sandbox: OpenSandbox,
    done: Callable[[QueuedCheck, CheckResult], None],
    prepare_failed: Callable[[Queued, CheckResult], CheckResult],
) -> None:
    """Run every item, as many at a time as `workers` admit, each pulled from the shared queue
    in the given order. `open_sandbox(tree, stack)` checks `tree` out (its clean-up
    pushed on `stack`) and returns the sandbox to run in and what gives it a fresh view
    between two checks; `done` gets each result as it comes."""
    queue = deque(items)
    lock = threading.Lock()

    def pull() -> QueuedCheck | None:
        with lock:
            return queue.popleft() if queue else None

    admission = Admission(workers, IdleCores(), waiting=lambda: len(queue))

    def work() -> None:
        held: list[_Held] = []  # this worker's checkout, while its checks are of one tree
        try:
            while True:
                admission.enter()
                try:
                    item = pull()
                    if item is None:
                        return
                    run_pulled(item, held)
                finally:
                    admission.leave()
        finally:
            while held:
                held.pop().close.close()

    def run_pulled(item: QueuedCheck, held: list[_Held]) -> None:
        if not held or held[0].tree != item.tree:
            while held:
                held.pop().close.close()
            stack = contextlib.ExitStack()
            try:
                sandbox, fresh = open_sandbox(item.tree, stack)
                held.append(_Held(item.tree, sandbox, stack, fresh))
            except BaseException:
                stack.close()
                raise
        elif held[0].used:
            # the tree is kept for its next check (ADR 0049), never what the last one wrote
            # in it (issue 42 #1): the view is fresh, and a `prepare` runs again in it
            held[0].fresh()
            held[0].prepared.clear()
        held[0].used = True
        done(item, _run_one(held[0], item, prepare_failed))

    count = max(1, min(workers.ceiling, len(queue)))
    if count == 1:
        work()
        return
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(work) for _ in range(count)]:
            future.result()


def _run_one(
    held: _Held, item: QueuedCheck, prepare_failed: Callable[[Queued, CheckResult], CheckResult]
) -> CheckResult:
    check = item.check
    key, environment = environment_of(check)
    writable = tuple(environment.writable_paths)
    if key not in held.prepared:
        found = None
        if environment.prepare is not None:
            found = run_command(held.sandbox, "prepare", environment.prepare, writable)
        held.prepared[key] = None if found is None or found.passed else found
    failed = held.prepared[key]
    if failed is not None:
        return prepare_failed(check, failed)
    return run_check(held.sandbox, check.check_id, check.descriptor, writable, item.alone)
