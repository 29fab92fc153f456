"""The live view of `imm run`: tasks by state, running lanes with elapsed time, log paths.
A rich live table on a terminal; plain event lines otherwise (CI logs, pipes)."""

from __future__ import annotations

import time
from collections import Counter
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from imm_action.local.coordinator import CoordinatorView
from imm_action.model.state import BatchChild, BatchRunState, ChildState
from imm_action.render import failure_text

LIVE_FAILURE_LINES = 8  # of each failed command's output on the live screen (status shows 40)


def parked(state: BatchRunState | None) -> list[BatchChild]:
    """Children that need a person, with why: what the failure lines of the views show."""
    if state is None:
        return []
    return [child for child in state.children if child.state is ChildState.NEEDS_HUMAN]


def failure_lines(child: BatchChild, most: int | None = None) -> list[str]:
    lines = [f"task {child.task_id} needs a person: {child.reason}"]
    lines.extend(failure_text(failure, "  ", most) for failure in child.failures)
    return lines


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
                self._print("\n".join(failure_lines(child)))

    def _print(self, line: str) -> None:
        elapsed = time.monotonic() - self._started
        print(f"imm [{elapsed:7.2f}s]: {line}", file=self._stream, flush=True)

    def close(self, view: CoordinatorView | None = None) -> None:
        if view is not None:
            self(view)


class LiveProgress:
    def __init__(self, stream: TextIO) -> None:
        # No refresh thread: lanes are forked from this process, and forking with threads
        # running is unsafe; the view is redrawn on every change instead.
        self._live = Live(console=Console(file=stream), auto_refresh=False, transient=False)
        self._live.start()
        self._last = 0.0

    def __call__(self, view: CoordinatorView) -> None:
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._live.update(render(view), refresh=True)

    def close(self, view: CoordinatorView | None = None) -> None:
        """Stop the live display; with `view`, its final screen shows that view, unthrottled."""
        if view is not None:
            self._live.update(render(view), refresh=True)
        self._live.stop()


def render(view: CoordinatorView) -> Group:
    parts: list[Table | Text] = []
    if view.state is not None:
        counts = Counter(str(child.state) for child in view.state.children)
        summary = " · ".join(f"{name} {count}" for name, count in sorted(counts.items()))
        parts.append(
            Text(f"{view.state.batch_id}: {view.state.batch_state} — {summary}", style="bold")
        )
    table = Table("lane", "elapsed", "log", box=None)
    for lane in view.running.values():
        table.add_row(lane.task_id, f"{time.monotonic() - lane.started:5.1f}s", str(lane.log))
    parts.append(table)
    parts.extend(Text(line, style="dim") for line in view.events[-5:])
    for child in parked(view.state):
        parts.append(Text("\n".join(failure_lines(child, LIVE_FAILURE_LINES)), style="red"))
    return Group(*parts)
