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


def test_the_live_view_says_what_the_agents_spent_so_far() -> None:
    from rich.console import Console

    from imm_action.model.spend import AgentSpend
    from tests.unit.test_decide import batch, pending

    spent = pending("a").model_copy(
        update={"spend": AgentSpend(cost_usd=0.42, tokens=12_000, runs=1, attempts=1)}
    )
    view = CoordinatorView(state=batch(spent, pending("b")))
    console = Console(file=io.StringIO(), width=120)
    console.print(render(view))
    assert "agents: 1 task, $0.42, 12 k tokens" in console.file.getvalue()  # type: ignore[attr-defined]
