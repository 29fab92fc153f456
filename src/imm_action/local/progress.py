"""The view of `imm run` off a terminal (CI logs, pipes): plain event lines, and what each
parked task failed. The live table on a terminal is `local/live.py`."""

from __future__ import annotations

import time
from typing import Protocol, TextIO

from imm_action.local.coordinator import CoordinatorView
from imm_action.model.state import BatchChild, BatchRunState, ChildState
from imm_action.render.failures import STATUS_FAILURE_LINES, folded_failures

LIVE_FAILURE_LINES = 8  # of each failed command's output on the live screen (status shows 40)


def parked(state: BatchRunState | None) -> list[BatchChild]:
    """Children that need a person, with why: what the failure lines of the views show."""
    if state is None:
        return []
    return [child for child in state.children if child.state is ChildState.NEEDS_HUMAN]


def failure_lines(child: BatchChild, most: int = STATUS_FAILURE_LINES) -> list[str]:
    """Why a parked task stopped, its failures folded to their causes (`most` lines of each
    distinct error)."""
    return [
        f"task {child.task_id} needs a person: {child.reason}",
        *folded_failures(child.failures, "  ", most),
    ]


class Progress(Protocol):
    """What `imm run` shows its view with: plain lines here, the live table (live.py)."""

    def __call__(self, view: CoordinatorView) -> None: ...

    def close(self, view: CoordinatorView | None = None) -> None: ...


class PlainProgress:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._printed = 0
        self._started = time.monotonic()
        self._told: set[tuple[str, str | None]] = set()

    def __call__(self, view: CoordinatorView) -> None:
        for line in view.events[self._printed :]:
            self._print(line)
        self._printed = len(view.events)
        for child in parked(view.state):
            if (child.task_id, child.reason) not in self._told:
                self._told.add((child.task_id, child.reason))
                # the cause now; the output once, in the report the run ends with
                self._print("\n".join(failure_lines(child, 0)))

    def _print(self, line: str) -> None:
        elapsed = time.monotonic() - self._started
        print(f"imm [{elapsed:7.2f}s]: {line}", file=self._stream, flush=True)

    def close(self, view: CoordinatorView | None = None) -> None:
        if view is not None:
            self(view)
