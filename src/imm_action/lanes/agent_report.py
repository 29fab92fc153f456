"""The agent's report of itself, read from the executor's standard output as it comes (issue
45): Claude Code's result object (`--output-format json`, or the last line of `stream-json`)
or Codex's `exec --json` events (`thread.started`, `turn.completed` with its usage).

Untrusted input: lines are read up to REPORT_LINE_BYTES (a longer one is skipped, never held),
only lines that start with `{` are parsed, and every field is taken only when it has the right
type and bounds — a wrong one is dropped alone. Nothing here can fail the lane: a report that is
absent or malformed gives an empty AgentRun, whose cost is unknown."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from imm_action.model.spend import MAX_TOKENS, MAX_USD, SESSION_PATTERN, AgentRun, ExecutorReport
from imm_action.text import split_lines

# Claude Code's result object holds the agent's last message (`result`): a long answer is a
# long line. Longer than this, the report is lost (cost unknown), never the lane.
REPORT_LINE_BYTES: Final = 1 << 20
_SESSION = re.compile(SESSION_PATTERN)
_SUBTYPE = re.compile(r"^[A-Za-z0-9_.-]{0,64}$")
# What marks Claude Code's result object among the JSON lines an executor prints.
_CLAUDE_FIELDS: Final = ("total_cost_usd", "num_turns", "duration_api_ms")


class AgentReportReader:
    """Fed the executor's standard output in chunks; `report()` is what it said of itself."""

    def __init__(self, kind: ExecutorReport = "auto") -> None:
        self.kind = kind
        self._line = bytearray()
        self._too_long = False
        self._claude: dict[str, Any] | None = None
        self._codex = _CodexTotals()

    def feed(self, chunk: bytes) -> None:
        if self.kind != "none":
            split_lines(chunk, self._take, self._end_line)

    def report(self) -> AgentRun:
        """What the output said, once it ended: an empty AgentRun when it said nothing."""
        if self.kind != "none":
            self._end_line()
        if self._claude is not None and self.kind in ("auto", "claude-json"):
            return _claude_run(self._claude)
        if self._codex.seen and self.kind in ("auto", "codex-jsonl"):
            return self._codex.run()
        return AgentRun()

    def _take(self, part: bytes) -> None:
        if self._too_long:
            return
        if len(self._line) + len(part) > REPORT_LINE_BYTES:
            self._too_long = True
            self._line.clear()
            return
        self._line += part

    def _end_line(self) -> None:
        line, too_long = bytes(self._line).strip(), self._too_long
        self._line.clear()
        self._too_long = False
        if too_long or not line.startswith(b"{"):
            return
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return
        if not isinstance(value, dict):
            return
        if any(name in value for name in _CLAUDE_FIELDS) or value.get("type") == "result":
            self._claude = value
        else:
            self._codex.take(value)


class _CodexTotals:
    """Codex reports usage per turn and never a cost: the turns' tokens summed."""

    def __init__(self) -> None:
        self.seen = False
        self.session: str | None = None
        self.turns = 0
        self.input_tokens = 0
        self.cached_tokens = 0
        self.output_tokens = 0
        self.failed = False

    def take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            self.seen = True
            self.session = _session(event.get("thread_id"))
        elif kind == "turn.completed":
            self.seen = True
            self.turns += 1
            usage = event.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            self.input_tokens += _count(usage.get("input_tokens"))
            self.cached_tokens += _count(usage.get("cached_input_tokens"))
            self.output_tokens += _count(usage.get("output_tokens"))
        elif kind in ("turn.failed", "error"):
            self.seen = True
            self.failed = True

    def run(self) -> AgentRun:
        # Codex counts cached input inside its input tokens; here they are counted apart
        cached = min(self.cached_tokens, self.input_tokens)
        return AgentRun(
            input_tokens=min(self.input_tokens - cached, MAX_TOKENS),
            cache_read_tokens=min(cached, MAX_TOKENS),
            output_tokens=min(self.output_tokens, MAX_TOKENS),
            turns=min(self.turns, 10**9),
            session_id=self.session,
            is_error=self.failed,
        )


def _claude_run(result: dict[str, Any]) -> AgentRun:
    usage = result.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    subtype = result.get("subtype")
    is_error = result.get("is_error")
    return AgentRun(
        cost_usd=_usd(result.get("total_cost_usd")),
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=_count(usage.get("cache_read_input_tokens")),
        cache_creation_tokens=_count(usage.get("cache_creation_input_tokens")),
        turns=_optional_count(result.get("num_turns"), 10**9),
        duration_ms=_optional_count(result.get("duration_ms"), 10**12),
        api_ms=_optional_count(result.get("duration_api_ms"), 10**12),
        session_id=_session(result.get("session_id")),
        is_error=is_error if isinstance(is_error, bool) else None,
        subtype=subtype if isinstance(subtype, str) and _SUBTYPE.fullmatch(subtype) else None,
    )


def _usd(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= MAX_USD else None


def _count(value: object) -> int:
    return _optional_count(value, MAX_TOKENS) or 0


def _optional_count(value: object, most: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= most else None


def _session(value: object) -> str | None:
    return value if isinstance(value, str) and _SESSION.fullmatch(value) else None
