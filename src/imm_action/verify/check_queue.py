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
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from imm_action.model.descriptor import DescriptorEnvironment, VerificationDescriptor
from imm_action.model.outcome import CheckResult
from imm_action.verify.sandbox import Sandbox, run_command


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


def default_workers(cores: int | None = None) -> int:
    """Workers when `verify_parallel` is not set: two more than the cores, as ninja runs two
    more jobs than cores. Checks that compute keep every core busy either way (two extra
    processes cost a little switching); checks that wait (on a network, a sleep, a database in
    a container) leave cores free that the extra workers use (decision 0049)."""
    return (cores or os.cpu_count() or 1) + 2


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
    """A worker's checkout of one tree, its sandbox, and the environments prepared in it."""

    tree: str
    sandbox: Sandbox
    close: contextlib.ExitStack
    prepared: dict[str, CheckResult | None] = field(default_factory=dict)


OpenSandbox = Callable[[str, contextlib.ExitStack], Sandbox]


def run_queue(
    items: Sequence[QueuedCheck],
    workers: int,
    open_sandbox: OpenSandbox,
    done: Callable[[QueuedCheck, CheckResult], None],
    prepare_failed: Callable[[Queued, CheckResult], CheckResult],
) -> None:
    """Run every item, `workers` at a time, each pulled from the shared queue in the given
    order. `open_sandbox(tree, stack)` checks `tree` out (its clean-up pushed on `stack`) and
    returns the sandbox to run in; `done` gets each result as it comes."""
    queue = deque(items)
    lock = threading.Lock()

    def pull() -> QueuedCheck | None:
        with lock:
            return queue.popleft() if queue else None

    def work() -> None:
        held: _Held | None = None
        try:
            while (item := pull()) is not None:
                if held is None or held.tree != item.tree:
                    if held is not None:
                        held.close.close()
                        held = None
                    stack = contextlib.ExitStack()
                    try:
                        held = _Held(item.tree, open_sandbox(item.tree, stack), stack)
                    except BaseException:
                        stack.close()
                        raise
                done(item, _run_one(held, item.check, prepare_failed))
        finally:
            if held is not None:
                held.close.close()

    count = max(1, min(workers, len(queue)))
    if count == 1:
        work()
        return
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(work) for _ in range(count)]:
            future.result()


def _run_one(
    held: _Held, check: Queued, prepare_failed: Callable[[Queued, CheckResult], CheckResult]
) -> CheckResult:
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
    return run_command(held.sandbox, check.check_id, check.descriptor.command, writable)


@contextlib.contextmanager
def scratch(make: Callable[[], Path]) -> Iterator[Path]:
    folder = make()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
