"""Untrusted text is cleaned and bounded by one reader and one function (imm_action.text), and
the outcome model refuses what a forged bundle could carry beyond the bounds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.model.outcome import (
    OUTCOME_CONTRACT,
    OUTCOME_MAX_BYTES,
    TEXT_MAX,
    LaneOutcome,
    parse_outcome,
)
from imm_action.text import LINE_BYTES, LineReader, clean_text, last_bytes, listed

SHOWN_AT_MOST = LINE_BYTES + len(" [… 999999999999 bytes cut]")


@given(st.binary(max_size=20_000), st.lists(st.integers(1, 5000), max_size=20))
def test_lines_are_the_same_however_the_stream_is_cut_and_never_longer_than_the_cap(
    data: bytes, cuts: list[int]
) -> None:
    whole = LineReader(64)
    expected = whole.feed(data) + whole.finish()
    pieces, start = LineReader(64), 0
    got: list[str] = []
    for size in cuts:
        got += pieces.feed(data[start : start + size])
        start += size
    got += pieces.feed(data[start:]) + pieces.finish()
    assert got == expected
    for line in got:
        assert len(line.encode()) <= 64 * 4 + len(" [… 99999 bytes cut]")
        assert clean_text(line) == line


def test_a_200_megabyte_line_is_held_as_4_kib() -> None:
    reader = LineReader()
    block = b"x" * (1 << 20)
    for _ in range(200):
        assert reader.feed(block) == []
    (line,) = reader.feed(b"\n")
    assert len(line.encode()) <= SHOWN_AT_MOST
    assert line.endswith(f"[… {200 * (1 << 20) - LINE_BYTES} bytes cut]")


@pytest.mark.parametrize(
    "text",
    ["\x1b[2J\x1b[Hclear", "\x1b]0;window title\x07x", "bell\x07", "nul\x00", "c1\x9bm", "\r"],
)
def test_terminal_escapes_and_control_characters_are_removed(text: str) -> None:
    cleaned = clean_text(text)
    assert all(ch in "\n\t" or ch.isprintable() for ch in cleaned)
    assert "\x1b" not in cleaned


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff"])
def test_bidirectional_controls_and_invisible_characters_are_written_out(char: str) -> None:
    cleaned = clean_text(f"ok{char}evil")
    assert char not in cleaned
    assert cleaned == f"ok<U+{ord(char):04X}>evil"


def test_newlines_and_tabs_stay() -> None:
    assert clean_text("a\tb\nc") == "a\tb\nc"


def test_the_end_of_a_text_is_kept_in_whole_characters() -> None:
    assert last_bytes("ééé", 3) == "é"


def test_a_long_list_of_paths_is_shortened_with_a_count() -> None:
    text = listed([f"f{i}.txt" for i in range(100_000)])
    assert text.endswith(" … and 99980 more")
    assert len(text) < 1100


def _outcome(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "contract": OUTCOME_CONTRACT, "batch_id": "batch-x", "task_id": "a", "attempt": 0,
        "state": "needs_human", "reason": "boom", "qa_failures": 0, "findings": [],
        "lane_commit": None,
    }  # fmt: skip
    data.update(changes)
    return data


def test_a_forged_outcome_with_an_oversize_reason_is_refused() -> None:
    assert parse_outcome(json.dumps(_outcome(reason="x" * (TEXT_MAX + 1)))) is None


def test_a_forged_outcome_larger_than_its_bound_is_refused_before_it_is_parsed() -> None:
    padded = json.dumps(_outcome()) + " " * OUTCOME_MAX_BYTES
    assert parse_outcome(padded) is None


def test_a_forged_outcome_with_escapes_is_read_clean() -> None:
    parsed = parse_outcome(json.dumps(_outcome(reason="\x1b[2Jgone\x1b]0;t\x07")))
    assert isinstance(parsed, LaneOutcome)
    assert parsed.reason == "gone"
