"""The test ledger of one check run (issue 58, SPEC §5.4): each test the run reported, by its id,
with how it ended. Read from a report a check's runner wrote (JUnit XML, TAP, jest's and
vitest's JSON: `imm_action.ledger`), kept with the run's result, and compared between the
verified head and a candidate (`integrate/ledger.py`): a test that passed on the head must pass
on every candidate that moves the branch."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Final, Literal

from pydantic import Field

from imm_action.model.common import StrictModel

TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed"]
LedgerSource = Literal["junit", "tap", "jest"]

# Bounds: a ledger is kept in the batch state with its run, and a lane can write any report.
MAX_TESTS: Final = 20_000
MAX_TEST_ID: Final = 500  # characters of one id; a longer one is cut and ends with its hash
MAX_NAMED_TESTS: Final = 20  # test ids one failure names (the rest are counted)

TestId = Annotated[str, Field(min_length=1, max_length=MAX_TEST_ID)]


class TestLedger(StrictModel):
    """What one run of a check said of each of its tests. `cut`: tests past MAX_TESTS that
    were left out (the failing ones are kept first), so a test missing from a cut ledger is
    unknown, not gone."""

    __test__ = False  # not a pytest test class, whatever its name

    source: LedgerSource
    tests: Annotated[dict[TestId, TestOutcome], Field(max_length=MAX_TESTS)]
    cut: Annotated[int, Field(ge=0)] = 0

    def failing(self) -> list[str]:
        """The tests that failed or erred, in id order."""
        return sorted(t for t, outcome in self.tests.items() if outcome in ("failed", "error"))


NamedTests = Annotated[
    list[Annotated[str, Field(max_length=MAX_TEST_ID + 40)]],
    Field(max_length=MAX_NAMED_TESTS + 1),
]


def named_tests(tests: list[str]) -> list[str]:
    """The first MAX_NAMED_TESTS of `tests`, and a last line counting the others."""
    if len(tests) <= MAX_NAMED_TESTS:
        return list(tests)
    return [*tests[:MAX_NAMED_TESTS], f"… and {len(tests) - MAX_NAMED_TESTS} more"]


REPORT_GONE = "no test report, where {count} tests passed on the batch head"
_MORE = re.compile(r"… and (\d+) more")


def lost_line(lost: Sequence[str]) -> str:
    """How a check's lost tests read in a reason: `3 tests no longer pass: a (missing), …`."""
    if len(lost) == 1 and lost[0].startswith(REPORT_GONE.split("{", 1)[0]):
        return lost[0]
    more = _MORE.fullmatch(lost[-1]) if lost else None
    count = len(lost) - 1 + int(more.group(1)) if more else len(lost)
    noun = "test no longer passes" if count == 1 else "tests no longer pass"
    return f"{count} {noun}: {', '.join(lost)}"
