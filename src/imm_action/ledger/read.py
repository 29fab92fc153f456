"""A check run's ledger from what it left: the report files imm asked for and the one its
descriptor names, and TAP in its output. Several reports are one ledger (a script that runs
pytest and node's tests); none that parses is no ledger."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from imm_action.ledger.bounds import MAX_REPORT_BYTES, bounded_ledger
from imm_action.ledger.jest import NotJest, read_jest
from imm_action.ledger.junit import NotJUnit, read_junit
from imm_action.ledger.tap import is_tap, read_tap
from imm_action.model.ledger import TestLedger


def read_report(data: bytes, roots: Sequence[str] = ()) -> TestLedger | None:
    """The ledger a report file holds, by what it starts with: XML (JUnit), JSON (jest,
    vitest) or TAP; None when it is none of them."""
    start = data.lstrip()[:1]
    try:
        if start == b"<":
            return read_junit(data)
        if start == b"{":
            return read_jest(data, roots)
    except (NotJUnit, NotJest):
        return None
    text = data.decode("utf-8", "replace")
    return read_tap(text) if is_tap(text) else None


def report_bytes(root: Path, relative: str) -> bytes | None:
    """The bytes of the regular file at `relative` below `root`, reached through no link at
    any step, at most MAX_REPORT_BYTES; None when there is no such file. A lane's code wrote
    it, and may have made it, or a folder on its way, a link to a host file."""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            below = os.open(part, flags | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = below
        file = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    with os.fdopen(file, "rb") as opened:
        if not stat.S_ISREG(os.fstat(opened.fileno()).st_mode):
            return None
        data = opened.read(MAX_REPORT_BYTES + 1)
    return data if len(data) <= MAX_REPORT_BYTES else None


def run_ledger(
    reports: Sequence[tuple[Path, str]], output: str | None, roots: Sequence[str] = ()
) -> TestLedger | None:
    """One ledger of every report that parses (each a folder and a path below it), and of TAP
    in the run's `output` when it holds a TAP stream; None when nothing reported tests."""
    found: list[TestLedger] = []
    for folder, relative in reports:
        data = report_bytes(folder, relative)
        ledger = read_report(data, roots) if data is not None else None
        if ledger is not None:
            found.append(ledger)
    if output is not None and is_tap(output):
        found.append(read_tap(output))
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    merged = [(test, outcome) for ledger in found for test, outcome in ledger.tests.items()]
    return bounded_ledger(found[0].source, merged)
