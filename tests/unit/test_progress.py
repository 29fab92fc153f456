"""The progress view of `imm run`: plain lines off a terminal, a live table on one."""

from __future__ import annotations

import io

from imm_action.local.coordinator import CoordinatorView
from imm_action.local.live import render
from imm_action.local.progress import PlainProgress


def test_plain_progress_prints_each_event_once_with_its_time() -> None:
    out = io.StringIO()
    progress = PlainProgress(out)
    view = CoordinatorView(events=["lane a started"])
    progress(view)
    view.events.append("lane a ended (ok)")
    progress(view)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("imm [")
    assert lines[0].endswith("]: lane a started")


def test_the_live_view_shows_running_lanes_and_recent_events() -> None:
    from rich.console import Console

    view = CoordinatorView(events=[f"event {n}" for n in range(8)])
    console = Console(file=io.StringIO(), width=100)
    console.print(render(view))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "lane" in text
    assert "elapsed" in text
    assert "event 7" in text
    assert "event 2" not in text
