"""The live view of `imm run` on a terminal: a rich table of tasks by state and running lanes
with elapsed time and log paths. Imported only on a terminal (rich costs ~25 ms to import,
which a run in CI or a pipe never needs)."""

from __future__ import annotations

import time
from collections import Counter
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from imm_action.integrate.spend import cost_line
from imm_action.local.coordinator import CoordinatorView
from imm_action.local.progress import LIVE_FAILURE_LINES, failure_lines, parked


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
        cost = cost_line(view.state)
        if cost is not None:  # what the agents spent so far (issue 45)
            parts.append(Text(cost))
    table = Table("lane", "elapsed", "log", box=None)
    for lane in view.running.values():
        table.add_row(lane.task_id, f"{time.monotonic() - lane.started:5.1f}s", str(lane.log))
    parts.append(table)
    parts.extend(Text(line, style="dim") for line in view.events[-5:])
    for child in parked(view.state):
        parts.append(Text("\n".join(failure_lines(child, LIVE_FAILURE_LINES)), style="red"))
    return Group(*parts)
