"""Failed commands for a person (pure, SPEC §5.7): how each ended, its last lines, folded to
their causes, and as collapsed `<details>` on GitHub."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

from imm_action.model.ledger import lost_line
from imm_action.model.network import refused_address_line
from imm_action.model.outcome import Failure
from imm_action.model.report import ReportChild
from imm_action.render.inert import inert_html, longest_backticks
from imm_action.text import plural


# -----------------------------------------------------------------
def _seconds(value: float) -> str:
    return f"{value:g}"


def failure_ending(failure: Failure) -> str:
    """How the command ended, in words: `exited with 1`, `timed out after 2 s`, …"""
    if failure.error:
        return f"could not run: {failure.error}"
    if failure.timeout_s is not None:
        return f"timed out after {_seconds(failure.timeout_s)} s"
    if failure.output_limited:
        return "was stopped: its output passed its limit"
    if failure.changed_outside:
        return f"changed files outside its writable paths: {', '.join(failure.changed_outside)}"
    if failure.lost_tests and failure.exit_code == 0:
        return f"passed, but {lost_line(failure.lost_tests)}"
    if failure.exit_code is None:
        return "ended without an exit status"
    return f"exited with {failure.exit_code}"


def failure_headline(failure: Failure) -> str:
    return f"{failure.step}: `{failure.command}` {failure_ending(failure)}"


def failure_text(failure: Failure, indent: str = "", most: int | None = None) -> str:
    """The plain-text form: the headline, then the output's last lines (`most` of them, when
    space is short), each behind `| `. The lane log, the live view, `imm status` and the
    executor's retry prompt all use it."""
    output = failure.output_tail.splitlines()
    if most is not None:
        output = output[-most:] if most > 0 else []
    return "\n".join([f"{indent}{failure_headline(failure)}", *ledger_lines(failure, indent),
                      *_output_lines(output, indent)])  # fmt: skip


def ledger_lines(failure: Failure, indent: str = "") -> list[str]:
    """What its test report says of a failed check (issue 58): the tests that failed. (The
    tests it lost, where it exited 0, are how it ended; else its failures say why.) And each
    host the network list refused it, with the line that allows it (issue 60)."""
    lines = []
    if failure.failed_tests:
        lines.append(f"{indent}  failed tests: {', '.join(failure.failed_tests)}")
    key = "lane_network" if failure.step in ("executor", "lane_setup") else "check_network"
    lines += [f"{indent}  refused: {refused_address_line(key, address)}"
              for address in failure.blocked_hosts]  # fmt: skip
    return lines


def _output_lines(output: Sequence[str], indent: str, whose: str = "its output") -> list[str]:
    """The last lines of a command's output, behind `| `, under a line saying whose."""
    if not output:
        return [f"{indent}  (no output)"]
    return [
        f"{indent}  last {plural(len(output), 'line')} of {whose}:",
        *(f"{indent}  | {line}".rstrip() for line in output),
    ]


STATUS_FAILURE_LINES = 12  # of one output shown by `imm status` and `imm run`'s report


def folded_failures(
    failures: Sequence[Failure], indent: str = "", most: int = STATUS_FAILURE_LINES
) -> list[str]:
    """A task's failed commands led by the cause: each command's headline, and each distinct
    error's output once — the last `most` lines — however many commands ended with it (seven
    checks failing on the same ImportError show it once, with the count). Commands are told
    apart by the error their output ends with (`error_signature`)."""
    groups: dict[str, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(error_signature(failure.output_tail), []).append(failure)
    lines: list[str] = []
    for members in groups.values():
        for failure in members:
            lines += [f"{indent}{failure_headline(failure)}", *ledger_lines(failure, indent)]
        if most <= 0:  # the headlines alone: the output is shown elsewhere
            continue
        whose = (
            "its output"
            if len(members) == 1
            else f"the output of {members[0].step} (the same error in {len(members)} commands)"
        )
        lines.extend(_output_lines(members[0].output_tail.splitlines()[-most:], indent, whose))
    return lines


_ERROR_LINE = re.compile(r"^E\s+\S|\b\w*(?:Error|Exception)\b.*:")
_FOLDERS = re.compile(r"(?:/[^/\s'\"()]+)+/")
_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def error_signature(output: str) -> str:
    """What tells one error from another in a command's output: its last error line (pytest's
    `E   ...`, a Python exception), else its last line; folders and numbers left out, so the
    same error met in two checkouts, in 0.05 s and in 0.07 s, is the same."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    last = errors[-1] if errors else (lines[-1] if lines else "")
    return _NUMBERS.sub("N", _FOLDERS.sub("", last))


def failures_markdown(children: Iterable[ReportChild]) -> list[str]:
    """One collapsed `<details>` per failed command of every child that shows one: the status
    comment, `imm status --format markdown` and the job summaries render failures with this."""
    parts: list[str] = []
    for child in children:
        parts.extend(failure_details(child.task_id, child.failures))
    return parts


def failure_details(task_id: str, failures: Iterable[Failure]) -> list[str]:
    """A task's failed commands as collapsed `<details>` blocks (Markdown lines)."""
    parts: list[str] = []
    for failure in failures:
        summary = (
            f"<code>{html.escape(task_id)}</code> · {html.escape(failure.step)}: "
            f"<code>{html.escape(failure.command)}</code> "
            f"{inert_html(failure_ending(failure))}"
        )
        # what its test report says, inside the fence: test ids are a lane's own text
        shown = "\n".join([*(line.strip() for line in ledger_lines(failure)),
                           failure.output_tail or "(no output)"])  # fmt: skip
        fence = code_fence(shown)
        parts += [
            f"<details><summary>{summary}</summary>",
            "",
            f"{fence}text",
            shown,
            fence,
            "",
            "</details>",
            "",
        ]
    return parts


def code_fence(text: str) -> str:
    """A code fence longer than any backtick run inside the text, so output cannot end it."""
    return "`" * max(3, longest_backticks(text) + 1)
