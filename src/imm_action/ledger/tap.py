"""TAP, the Test Anything Protocol: what tape prints, and node's test runner when its output
is not a terminal. Read line by line with tap.py's parser; only the top level counts (node
indents its subtests under the test that holds them), and tape's `# name` comment before a
test's assertions names them."""

from __future__ import annotations

from collections.abc import Iterator

from tap.line import Diagnostic, Result
from tap.parser import Parser

from imm_action.ledger.bounds import bounded_ledger
from imm_action.model.ledger import TestLedger, TestOutcome

_SUMMARY = ("tests ", "pass ", "fail ", "skip ", "todo ", "cancelled ", "suites ",
            "duration_ms ", "ok", "not ok")  # fmt: skip


def is_tap(text: str) -> bool:
    """Whether `text` holds a TAP stream: a `TAP version` line, or a plan and a result."""
    lines = text.splitlines()
    if any(line.startswith("TAP version ") for line in lines):
        return True
    has_plan = any(line.startswith("1..") for line in lines)
    return has_plan and any(line.startswith(("ok ", "not ok ")) for line in lines)


def read_tap(text: str) -> TestLedger:
    return bounded_ledger("tap", _results(text))


def _results(text: str) -> Iterator[tuple[str, TestOutcome]]:
    parser = Parser()
    group = ""
    seen: dict[str, int] = {}
    for raw in text.splitlines():
        if raw[:1].isspace():
            continue  # a subtest, or a YAML block of diagnostics
        line = parser.parse_line(raw.rstrip())
        if isinstance(line, Diagnostic):
            comment = line.text.lstrip("#").strip()
            if comment and not comment.startswith(("Subtest:", *_SUMMARY)):
                group = comment
            continue
        if not isinstance(line, Result):
            continue
        name = line.description.removeprefix("- ").strip() or f"#{line.number or len(seen) + 1}"
        key = f"{group} > {name}" if group else name
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:  # tape's `should be equal`, asserted twice in one test
            key = f"{key} #{seen[key]}"
        yield key, _outcome(line)


def _outcome(result: Result) -> TestOutcome:
    if result.skip:
        return "skipped"
    if result.todo:
        return "passed" if result.ok else "xfailed"
    return "passed" if result.ok else "failed"
