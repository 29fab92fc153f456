"""Parsing `/imm` comment commands: untrusted text in, plain values out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.github.comment_commands import Command, Unknown, parse_comment


def test_one_command_per_line_in_order() -> None:
    body = (
        "Please:\n/imm plan\n  /imm run --max-parallel 3\n/imm retry cart\n/imm status\n/imm cancel"
    )
    assert parse_comment(body) == [
        Command("plan"), Command("run", max_parallel=3), Command("retry", task_id="cart"),
        Command("status"), Command("cancel"),
    ]  # fmt: skip


def test_quoted_lines_and_fenced_code_are_not_commands() -> None:
    body = "> /imm cancel\n```\n/imm cancel\n```\ntext /imm cancel\n/immediately\n"
    assert parse_comment(body) == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("/imm", "names no command"),
        ("/imm deploy", "`deploy` is not an imm command"),
        ("/imm run --max-parallel 0", "between 1 and 256"),
        ("/imm run --max-parallel 999", "between 1 and 256"),
        ("/imm run now", "only `--max-parallel N`"),
        ("/imm retry", "one task id"),
        ("/imm retry ../etc", "one task id"),
        ("/imm status now", "takes no arguments"),
        ("/imm run 'unclosed", "could not be read"),
    ],
)
def test_bad_commands_are_answered_with_why(line: str, why: str) -> None:
    (parsed,) = parse_comment(line)
    assert isinstance(parsed, Unknown)
    assert why in parsed.why


def test_shell_and_expression_syntax_is_only_text() -> None:
    body = (
        "/imm retry $(rm -rf /)\n/imm retry `id`\n"
        "/imm retry ${{ secrets.TOKEN }}\n/imm run; echo hi"
    )
    parsed = parse_comment(body)
    assert all(isinstance(item, Unknown) for item in parsed)
    assert len(parsed) == 4


@given(st.text(max_size=200))
def test_any_comment_parses_to_commands_or_answers(body: str) -> None:
    for item in parse_comment(body):
        if isinstance(item, Command):
            assert item.verb in ("run", "status", "plan", "retry", "cancel")
            assert item.task_id is None or item.task_id.isprintable()
