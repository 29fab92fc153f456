"""Task Intent v1 (SPEC §4.2), compatible with immune-brain's files."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, field_validator

from imm_action.model.common import Identifier, StrictModel, sha256_digest
from imm_action.model.descriptor import DescriptorError, parse_descriptor
from imm_action.model.ledger import MAX_TEST_ID
from imm_action.model.paths import relative_path_problem

INTENT_CONTRACT = "assurance_kernel/task_intent/v1"
MAX_INTENT_BYTES = 64 * 1024
MAX_SCOPE_ENTRY = 200
_GLOB = re.compile(r"[*?\[\]{}!]")
_EVERYTHING = frozenset({".", "*", "**", "**/*"})


class AcceptanceItem(StrictModel):
    id: Annotated[str, Field(min_length=1, max_length=64)]
    assertion: Annotated[str, Field(min_length=1, max_length=2000)]
    verification: str = Field(description="A JSON string holding a verification descriptor v2.")

    @field_validator("verification")
    @classmethod
    def _holds_a_descriptor(cls, value: str) -> str:
        try:
            parse_descriptor(value)
        except DescriptorError as error:
            raise ValueError(str(error)) from None
        return value


class TaskIntent(StrictModel):
    contract: Literal["assurance_kernel/task_intent/v1"]
    task_id: Identifier
    goal: Annotated[str, Field(min_length=1, max_length=2000)]
    acceptance: Annotated[list[AcceptanceItem], Field(min_length=1)]
    scope_hint: Annotated[list[str], Field(min_length=1)]
    risk: Literal["routine", "material", "critical"]
    revision: Annotated[int, Field(ge=1)]
    owner: Literal["user"]
    # Optional, so every intent the reference wrote stays valid (issue 58): tests this task
    # means to remove or rename. The integrator does not hold a candidate of its lane to them
    # (a test that passed on the batch head must pass on every move otherwise), and the
    # report lists them once it lands.
    retires_tests: (
        Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_TEST_ID)]],
            Field(min_length=1, max_length=200),
        ]
        | None
    ) = Field(
        default=None,
        description="Test ids (as the check's report names them: `tests/test_x.py::test_y`, "
        "a file, a class or a dotted module) this task removes or renames on purpose.",
    )

    @field_validator("goal")
    @classmethod
    def _goal_has_a_subject(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("goal must not be blank")
        return value

    @field_validator("acceptance")
    @classmethod
    def _acceptance_ids_unique(cls, value: list[AcceptanceItem]) -> list[AcceptanceItem]:
        seen: set[str] = set()
        for item in value:
            if item.id in seen:
                raise ValueError(f"acceptance id {item.id!r} is used twice")
            seen.add(item.id)
        return value

    @field_validator("scope_hint")
    @classmethod
    def _scope_is_safe_and_normalised(cls, value: list[str]) -> list[str]:
        for entry in value:
            problem = scope_entry_problem(entry)
            if problem is not None:
                raise ValueError(f"scope entry {entry!r} {problem}")
        return normalise_scope(value)

    @property
    def subject(self) -> str:
        """The lane commit subject's text: the goal's first line."""
        return self.goal.strip().splitlines()[0].strip()

    def content_hash(self) -> str:
        dumped = self.model_dump(mode="json")
        if dumped.get("retires_tests") is None:  # the hash of every intent written before it
            dumped.pop("retires_tests", None)
        return sha256_digest(json.dumps(dumped, sort_keys=True, ensure_ascii=False))


def scope_entry_problem(entry: str) -> str | None:
    if len(entry) > MAX_SCOPE_ENTRY:
        return f"is longer than {MAX_SCOPE_ENTRY} characters"
    if entry in _EVERYTHING:
        return "names the whole repository; list the directories the task touches"
    return relative_path_problem(entry)


def is_literal_scope(entry: str) -> bool:
    return _GLOB.search(entry) is None


def normalise_scope(entries: list[str]) -> list[str]:
    """Dedupe, sort, and drop entries already covered by a literal entry above them."""
    unique = sorted(set(entries))
    literals = {entry for entry in unique if is_literal_scope(entry)}
    return [entry for entry in unique if not _under_a_literal(entry, literals)]


def _under_a_literal(entry: str, literals: set[str]) -> bool:
    cut = entry.find("/")
    while cut != -1:
        if entry[:cut] in literals:
            return True
        cut = entry.find("/", cut + 1)
    return False


def intent_path(task_id: str) -> str:
    """Where the intent of `task_id` lives in a repository."""
    return f"docs/plans/{task_id}.intent.json"


@dataclass(frozen=True)
class ValidIntent:
    """An intent file that parsed, with the hash of its bytes (the plan records it)."""

    intent: TaskIntent
    content_hash: str


@dataclass(frozen=True)
class InvalidIntent:
    """An intent file that is missing or broken; its task is planned `invalid_intent`."""

    why: str


IntentReading = ValidIntent | InvalidIntent
