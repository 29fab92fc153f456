"""Verification descriptor v2 (SPEC §4.3): the one command an acceptance item is checked by."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator

from imm_action.model.common import StrictModel
from imm_action.model.paths import relative_path_problem
from imm_action.model.validation import json_path, validation_messages

DESCRIPTOR_CONTRACT = "assurance_kernel/verification_descriptor/v2"
DESCRIPTOR_V1_CONTRACT = "assurance_kernel/verification_descriptor/v1"
MIGRATION_CODE = "verification_contract_migration_required"
MAX_DESCRIPTOR_BYTES = 64 * 1024
MAX_ARGS = 64
MAX_ARG_BYTES = 512
MAX_WRITABLE_PATHS = 32
MAX_READ_PATHS = 64
MAX_READ_ENTRY = 200

_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BARE_PATH = re.compile(r"[A-Za-z0-9_][^/\s]*/\S*[^/\s]$")  # `scripts/lint.sh`, not `/bin/x`


class DescriptorCommand(StrictModel):
    executable: str = Field(
        description="A tool name looked up on PATH, or './<repo-relative file>'.",
    )
    argv: Annotated[list[str], Field(max_length=MAX_ARGS)] = Field(
        default_factory=list, description="Arguments; never passed through a shell."
    )
    cwd: str = Field(default=".", description="Repo-relative working directory.")
    timeout_ms: Annotated[int, Field(ge=1, le=600_000)] = 300_000
    max_output_bytes: Annotated[int, Field(ge=1, le=262_144)] = 65_536

    @field_validator("executable")
    @classmethod
    def _executable_is_tool_or_repo_file(cls, value: str) -> str:
        if value.startswith("./"):
            problem = relative_path_problem(value[2:])
            if problem is not None:
                raise ValueError(f"repo file {value!r} {problem}")
            _refuse_git_dir(value[2:])
            return value
        if _TOOL_NAME.fullmatch(value) is None:
            # a path written as a shell would take it: say how a file of the repository is named
            hint = f" (a file of the repository: './{value}')" if _BARE_PATH.match(value) else ""
            raise ValueError(
                f"{value!r} is neither a tool name (letters, digits, _.+-) nor './<repo file>'"
                + hint
            )
        return value

    @field_validator("argv")
    @classmethod
    def _arguments_are_plain(cls, value: list[str]) -> list[str]:
        for index, argument in enumerate(value):
            if len(argument.encode("utf-8")) > MAX_ARG_BYTES:
                raise ValueError(f"argument {index} is longer than {MAX_ARG_BYTES} bytes")
            if _CONTROL.search(argument):
                raise ValueError(f"argument {index} contains a control character")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd_stays_in_repo(cls, value: str) -> str:
        problem = relative_path_problem(value, allow_dot=True)
        if problem is not None:
            raise ValueError(f"cwd {problem}")
        _refuse_git_dir(value)
        return value


class DescriptorEnvironment(StrictModel):
    prepare: DescriptorCommand | None = Field(
        default=None,
        description="Run before each check of its environment group, on the check's fresh "
        "tree and home (its work would otherwise be what one check leaves the next).",
    )
    writable_paths: Annotated[list[str], Field(max_length=MAX_WRITABLE_PATHS)] = Field(
        default_factory=list,
        description="Repo-relative directories the check may change; all else must stay as it was.",
    )

    @field_validator("writable_paths")
    @classmethod
    def _paths_stay_in_repo(cls, value: list[str]) -> list[str]:
        for entry in value:
            problem = relative_path_problem(entry)
            if problem is not None:
                raise ValueError(f"writable path {entry!r} {problem}")
            _refuse_git_dir(entry)
        return value


def _read_path_in_repo(entry: str) -> str:
    if len(entry) > MAX_READ_ENTRY:
        raise ValueError(f"read path {entry[:40]!r}… is longer than {MAX_READ_ENTRY}")
    problem = relative_path_problem(entry)
    if problem is not None:
        raise ValueError(f"read path {entry!r} {problem}")
    return entry


# What a check declares it reads (a task's descriptor, a branch check): repo-relative paths or
# globs, each refused at its own place in the file.
ReadPaths = Annotated[
    list[Annotated[str, Field(min_length=1), AfterValidator(_read_path_in_repo)]],
    Field(min_length=1, max_length=MAX_READ_PATHS),
]


def _report_in_repo(entry: str) -> str:
    problem = relative_path_problem(entry)
    if problem is not None:
        raise ValueError(f"report {entry!r} {problem}")
    _refuse_git_dir(entry)
    return entry


# Where a check's runner writes its test report (JUnit XML, TAP, jest's or vitest's JSON),
# repository-relative (issue 58): read after the run, its tests kept in the test ledger.
ReportPath = Annotated[str, Field(min_length=1, max_length=MAX_READ_ENTRY),
                       AfterValidator(_report_in_repo)]  # fmt: skip


class VerificationDescriptor(StrictModel):
    contract: Literal["assurance_kernel/verification_descriptor/v2"]
    command: DescriptorCommand
    environment: DescriptorEnvironment | None = None
    # Optional, so every descriptor the reference wrote stays valid (ADR 0047): the files the
    # check's result depends on. A move of the batch branch that changes none of them carries
    # the check's last pass over instead of running it again; without it the check runs on
    # every move.
    reads: ReadPaths | None = Field(
        default=None,
        description="Repo-relative paths or globs (as scope_hint) the check's result depends "
        "on; a move that changes none of them keeps its last pass.",
    )
    # Optional (issue 58): a report imm does not ask for itself (pytest's it asks for through
    # PYTEST_ADDOPTS; any runner may write to $IMM_TEST_REPORT; TAP is read from the output).
    report: ReportPath | None = Field(
        default=None,
        description="Repo-relative file the check's test runner writes its report to (JUnit "
        "XML, TAP, or jest's/vitest's JSON); its tests join the check's test ledger.",
    )


def _refuse_git_dir(path: str) -> None:
    if ".git" in path.split("/"):
        raise ValueError(f"{path!r} must not reach into .git")


class DescriptorError(ValueError):
    """A descriptor string that is not a valid v2 descriptor; carries every problem found."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {msg}" if path else msg for path, msg in problems))


@functools.lru_cache(maxsize=4096)
def parse_descriptor(text: str) -> VerificationDescriptor:
    """Parse the JSON text held in an acceptance item's `verification` string.

    Cached: initiatives repeat the same few descriptors across thousands of intents, and the
    result is a frozen model (a failure raises again on every call, as lru_cache caches none)."""
    if len(text.encode("utf-8")) > MAX_DESCRIPTOR_BYTES:
        raise DescriptorError([("", f"descriptor is larger than {MAX_DESCRIPTOR_BYTES} bytes")])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        problem = f"descriptor is not JSON: {error.msg} at column {error.colno}"
        raise DescriptorError([("", problem)]) from None
    if isinstance(data, dict) and data.get("contract") == DESCRIPTOR_V1_CONTRACT:
        raise DescriptorError([("", migration_message(data))])
    try:
        return VerificationDescriptor.model_validate(data)
    except ValidationError as error:
        raise DescriptorError(validation_messages(error)) from None


def migration_message(v1: dict[str, Any]) -> str:
    """The refusal of a v1 descriptor, with the v2 text that does the same thing."""
    return (
        f"{MIGRATION_CODE}: descriptor v1 is no longer accepted; "
        f"use this v2 descriptor instead: {json.dumps(migrate_v1(v1), ensure_ascii=False)}"
    )


def migrate_v1(v1: dict[str, Any]) -> dict[str, Any]:
    """Best-effort v2 equivalent of a v1 descriptor (`command` as a string or argv list)."""
    raw = v1.get("command", v1.get("argv", []))
    argv = shlex.split(raw) if isinstance(raw, str) else [str(part) for part in raw or []]
    command: dict[str, Any] = {
        "executable": argv[0] if argv else "<tool>",
        "argv": argv[1:],
    }
    for key in ("cwd", "timeout_ms", "max_output_bytes"):
        if key in v1:
            command[key] = v1[key]
    return {"contract": DESCRIPTOR_CONTRACT, "command": command}


__all__ = [
    "DESCRIPTOR_CONTRACT",
    "DescriptorCommand",
    "DescriptorEnvironment",
    "DescriptorError",
    "VerificationDescriptor",
    "json_path",
    "parse_descriptor",
]
