"""How a failed command reads (pure): its ending in words, its output behind a fence that the
output cannot close, plural words, and the program name commands are written with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from imm_action.cli import program_name
from imm_action.model.outcome import Failure
from imm_action.render.failures import code_fence, failure_ending, failure_text, failures_markdown
from imm_action.text import plural


def _failure(**fields: object) -> Failure:
    base: dict[str, object] = {"step": "a:ok", "command": "tool --x", "exit_code": 1,
                               "output_tail": ""}  # fmt: skip
    return Failure.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("fields", "ending"),
    [
        ({}, "exited with 1"),
        ({"exit_code": None, "timeout_s": 2.0}, "timed out after 2 s"),
        ({"exit_code": None, "timeout_s": 0.25}, "timed out after 0.25 s"),
        ({"exit_code": None, "error": "'nope' was not found on PATH"},
         "could not run: 'nope' was not found on PATH"),
        ({"exit_code": 0, "changed_outside": ["a.txt"]},
         "changed files outside its writable paths: a.txt"),
        ({"exit_code": None, "output_limited": True}, "was stopped: its output passed its limit"),
        ({"exit_code": 0, "lost_tests": ["t.py::a (missing)"]},
         "passed, but 1 test no longer passes: t.py::a (missing)"),
        ({"exit_code": 0, "lost_tests": ["no test report, where 3 tests passed on the batch head"]},
         "passed, but no test report, where 3 tests passed on the batch head"),
    ],
)  # fmt: skip
def test_a_failure_ends_in_words(fields: dict[str, object], ending: str) -> None:
    assert failure_ending(_failure(**fields)) == ending


def test_the_text_form_shows_the_last_lines_behind_a_bar() -> None:
    text = failure_text(_failure(output_tail="one\ntwo"), "  ")
    assert text.splitlines() == [
        "  a:ok: `tool --x` exited with 1",
        "    last 2 lines of its output:",
        "    | one",
        "    | two",
    ]


def test_the_tests_a_report_says_failed_are_named_under_the_headline_and_in_the_prompt() -> None:
    """Issue 58: the failing test ids, not only the output's last lines — for a person and for
    the executor's next attempt."""
    from imm_action.lanes.prompt import render_prompt
    from imm_action.model.intent import TaskIntent
    from tests.conftest import intent

    failure = _failure(output_tail="E assert 0", failed_tests=["t.py::a", "t.py::b"])
    assert failure_text(failure).splitlines()[:2] == [
        "a:ok: `tool --x` exited with 1",
        "  failed tests: t.py::a, t.py::b",
    ]
    prompt = render_prompt(TaskIntent.model_validate(intent("a")), 0, 2, [failure])
    assert "failed tests: t.py::a, t.py::b" in prompt


def test_the_failing_tests_stay_inside_the_markdown_fence() -> None:
    """Test ids are a lane's own text: on GitHub they sit in the code block, inert."""
    from imm_action.render.failures import failure_details

    failure = _failure(output_tail="boom", failed_tests=["@octocat <img src=x> #1"])
    block = "\n".join(failure_details("a", [failure]))
    fenced = block.split("```text\n", 1)[1].split("\n```", 1)[0]
    assert fenced == "failed tests: @octocat <img src=x> #1\nboom"


def test_output_holding_a_code_fence_cannot_end_the_markdown_block() -> None:
    assert code_fence("a ```` b") == "`````"
    assert code_fence("plain") == "```"


def test_failure_markdown_escapes_html_in_the_summary() -> None:
    from imm_action.model.report import ReportChild
    from imm_action.model.state import ChildState

    child = ReportChild.model_validate_json(
        ReportChild.model_construct(
            task_id="a", state=ChildState.NEEDS_HUMAN, reason="r", commit=None, lane_branch=None,
            attempts=0, qa_failures=0, failures=[_failure(command="echo '<b>'")],
        ).model_dump_json()
    )  # fmt: skip
    summary = failures_markdown([child])[0]
    assert "<b>" not in summary
    assert "&lt;b&gt;" in summary


@pytest.mark.parametrize(("count", "text"), [(0, "0 tasks"), (1, "1 task"), (2, "2 tasks")])
def test_counts_agree_with_their_noun(count: int, text: str) -> None:
    assert plural(count, "task") == text


def test_commands_to_paste_name_the_program_as_invoked_and_absolute() -> None:
    assert program_name("/opt/venv/bin/imm") == "/opt/venv/bin/imm"
    assert program_name("bin/imm") == str(Path("bin/imm").absolute())
    assert program_name("/x/imm_action/__main__.py") == f"{sys.executable} -m imm_action"
