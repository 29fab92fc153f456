"""The agent's report of itself, read from an executor's standard output (issue 45): Claude
Code's result object, Codex's usage events; untrusted, so nothing it holds can fail a lane."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from imm_action.lanes.agent_report import REPORT_LINE_BYTES, AgentReportReader
from imm_action.model.spend import AgentRun, spend_of_runs

CLAUDE_RESULT = {
    "type": "result", "subtype": "success", "is_error": False, "duration_ms": 5321,
    "duration_api_ms": 4870, "num_turns": 6, "result": "done", "session_id": "9f3c-41e7",
    "total_cost_usd": 0.1234,
    "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 5000,
              "cache_read_input_tokens": 300, "output_tokens": 420,
              "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
    "permission_denials": [], "uuid": "u",
}  # fmt: skip


def read(output: bytes, kind: str = "auto", chunk: int = 7) -> AgentRun:
    reader = AgentReportReader(kind)  # type: ignore[arg-type]
    for start in range(0, len(output), chunk):
        reader.feed(output[start : start + chunk])
    return reader.report()


def test_claude_codes_json_result_gives_cost_tokens_turns_api_time_and_session() -> None:
    run = read(b"some talk\n" + json.dumps(CLAUDE_RESULT).encode() + b"\n")
    assert run == AgentRun(
        cost_usd=0.1234, input_tokens=1200, output_tokens=420, cache_read_tokens=300,
        cache_creation_tokens=5000, turns=6, duration_ms=5321, api_ms=4870,
        session_id="9f3c-41e7", is_error=False, subtype="success",
    )  # fmt: skip


def test_the_last_line_of_stream_json_is_the_result_read() -> None:
    events = [{"type": "system", "subtype": "init", "session_id": "s"},
              {"type": "assistant", "message": {"content": []}}, CLAUDE_RESULT]  # fmt: skip
    output = b"".join(json.dumps(event).encode() + b"\n" for event in events)
    assert read(output).cost_usd == 0.1234
    assert read(output.rstrip(b"\n")).cost_usd == 0.1234  # no newline at the end


def test_codex_usage_events_are_summed_over_turns_with_the_thread_as_session() -> None:
    events = [
        {"type": "thread.started", "thread_id": "th_abc"},
        {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 400,
                                             "output_tokens": 50}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "hi"}},
        {"type": "turn.completed", "usage": {"input_tokens": 2000, "cached_input_tokens": 1500,
                                             "output_tokens": 70}},
    ]  # fmt: skip
    output = b"".join(json.dumps(event).encode() + b"\n" for event in events)
    run = read(output)
    assert run.cost_usd is None  # Codex says no cost: it stays unknown
    assert (run.input_tokens, run.cache_read_tokens, run.output_tokens) == (1100, 1900, 120)
    assert (run.turns, run.session_id, run.is_error) == (2, "th_abc", False)
    assert read(output, "claude-json") == AgentRun()  # told to read Claude's only


def test_none_reads_nothing_and_no_report_is_an_unknown_cost() -> None:
    assert read(json.dumps(CLAUDE_RESULT).encode(), "none") == AgentRun()
    assert read(b"plain text only\n") == AgentRun()
    spend = spend_of_runs([AgentRun(), read(json.dumps(CLAUDE_RESULT).encode())])
    assert (spend.runs, spend.unknown, spend.cost_usd) == (2, 1, 0.1234)


def test_a_field_of_the_wrong_type_or_out_of_bounds_is_dropped_alone() -> None:
    forged = {**CLAUDE_RESULT, "total_cost_usd": -3, "num_turns": True, "duration_ms": "5",
              "session_id": "$(rm -rf ~)", "subtype": "x" * 200,
              "usage": {"input_tokens": 10**20, "output_tokens": 1.5}}  # fmt: skip
    run = read(json.dumps(forged).encode())
    assert run == AgentRun(duration_ms=None, api_ms=4870, is_error=False)
    assert read(b'{"total_cost_usd": NaN}\n').cost_usd is None
    assert read(b'{"total_cost_usd": 1e309}\n').cost_usd is None


def test_a_cost_over_a_million_dollars_is_dropped_never_failing_the_reader() -> None:
    """Issue 62 #7: a report is never believed past `MAX_USD` — and never fails the lane
    (AgentRun's own bound would raise, were the reader to pass it on)."""
    run = read(json.dumps({**CLAUDE_RESULT, "total_cost_usd": 1_000_000.01}).encode())
    assert run.cost_usd is None
    assert run.input_tokens == 1200  # the rest of the report stands
    assert read(json.dumps({**CLAUDE_RESULT, "total_cost_usd": 1_000_000}).encode()).cost_usd


def test_a_line_longer_than_the_bound_is_skipped_without_being_held() -> None:
    huge = json.dumps({**CLAUDE_RESULT, "result": "x" * REPORT_LINE_BYTES}).encode()
    reader = AgentReportReader()
    for start in range(0, len(huge), 65536):
        reader.feed(huge[start : start + 65536])
        assert len(reader._line) <= REPORT_LINE_BYTES  # the bound itself
    assert reader.report() == AgentRun()
    # an earlier report survives a huge line after it
    assert read(json.dumps(CLAUDE_RESULT).encode() + b"\n" + huge, chunk=65536).cost_usd == 0.1234


def test_deeply_nested_or_broken_json_is_no_report() -> None:
    assert read(b"{" * 100_000 + b"\n") == AgentRun()
    assert read(b'{"total_cost_usd": 0.5,\n') == AgentRun()
    assert read(b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n") == AgentRun()


@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=64))
def test_no_output_whatever_its_bytes_fails_the_reader(output: bytes, chunk: int) -> None:
    run = read(output, chunk=chunk)
    assert run.cost_usd is None or run.cost_usd >= 0
