"""jest's `--json` report, which vitest's `json` reporter writes too: per test file, each
assertion's full name and status. A file's path is kept relative to the tree it ran in."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from imm_action.ledger.bounds import bounded_ledger
from imm_action.model.ledger import TestLedger, TestOutcome

_STATUS: dict[str, TestOutcome] = {
    "passed": "passed", "failed": "failed", "pending": "skipped", "skipped": "skipped",
    "todo": "skipped", "disabled": "skipped", "focused": "passed",
}  # fmt: skip


class NotJest(ValueError):
    """The text is not a jest or vitest JSON report."""


def read_jest(data: bytes, roots: Sequence[str] = ()) -> TestLedger:
    """The ledger of a jest/vitest JSON report; `roots`: where the tree lay for the run (a
    file's path is made relative to the first that holds it)."""
    try:
        report = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise NotJest(f"not JSON: {error}") from None
    files = report.get("testResults") if isinstance(report, dict) else None
    if not isinstance(files, list):
        raise NotJest("no `testResults` list")
    return bounded_ledger("jest", _assertions(files, roots))


def _assertions(files: list[Any], roots: Sequence[str]) -> Iterator[tuple[str, TestOutcome]]:
    for file in files:
        if not isinstance(file, dict) or not isinstance(file.get("assertionResults"), list):
            continue
        where = _relative(str(file.get("name", "")), roots)
        for test in file["assertionResults"]:
            if not isinstance(test, dict):
                continue
            name = test.get("fullName") or " ".join(
                [*map(str, test.get("ancestorTitles") or []), str(test.get("title", ""))]
            )
            status = _STATUS.get(str(test.get("status")), "failed")
            yield f"{where} > {name}", status


def _relative(path: str, roots: Sequence[str]) -> str:
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path
