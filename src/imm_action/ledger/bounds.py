"""One ledger made from the tests a report lists, within the bounds the batch state keeps."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from imm_action.model.ledger import MAX_TEST_ID, MAX_TESTS, LedgerSource, TestLedger, TestOutcome
from imm_action.text import clean_text

# How much of a report is read: a runner's report of 20,000 tests is a few megabytes.
MAX_REPORT_BYTES = 32 * 1024 * 1024
# Which outcome a test reported twice keeps (a rerun plugin reports a flaky test's tries).
_RANK: dict[TestOutcome, int] = {"error": 0, "failed": 1, "xfailed": 2, "skipped": 3, "passed": 4}


_PLAIN_ID = re.compile(r"[!-~]+(?: [!-~]+)*")  # printable ASCII, single spaces: kept as it is


def ledger_id(text: str) -> str:
    """A test's id as the ledger keys it: cleaned of control characters, and cut to
    MAX_TEST_ID characters (ending with a hash of the whole, so two long ids stay apart)."""
    if len(text) <= MAX_TEST_ID and _PLAIN_ID.fullmatch(text):
        return text
    cleaned = clean_text(" ".join(text.split())) or "(unnamed)"
    if len(cleaned) <= MAX_TEST_ID:
        return cleaned
    digest = hashlib.sha256(cleaned.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{cleaned[: MAX_TEST_ID - 18]}…~{digest}"


def bounded_ledger(source: LedgerSource, found: Iterable[tuple[str, TestOutcome]]) -> TestLedger:
    """The ledger of `found` (id, outcome) pairs: a test reported more than once keeps its
    best outcome (a rerun that passed), and past MAX_TESTS the failing tests are kept first."""
    tests: dict[str, TestOutcome] = {}
    for raw, outcome in found:
        key = ledger_id(raw)
        known = tests.get(key)
        if known is None or _RANK[outcome] > _RANK[known]:
            tests[key] = outcome
    if len(tests) <= MAX_TESTS:
        return TestLedger.model_construct(source=source, tests=tests, cut=0)
    kept = sorted(tests, key=lambda key: (_RANK[tests[key]], key))[:MAX_TESTS]
    return TestLedger.model_construct(
        source=source, tests={key: tests[key] for key in kept}, cut=len(tests) - MAX_TESTS
    )
