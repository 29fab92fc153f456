"""What a lane publishes when it ends (`refs/imm/lanes/<batch>/<task>`), and check results."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, ValidationError

from imm_action.model.common import Digest, GitOid, Identifier, StrictModel

OUTCOME_CONTRACT: Final = "imm_action/lane_outcome/v1"
OUTCOME_FILE: Final = "outcome.json"  # the one file in an outcome commit's tree
# Every lane commit's message ends with this trailer naming its batch (SPEC §5.1 step 5).
BATCH_TRAILER: Final = "Immune-Brain-Batch"
OUTPUT_TAIL_BYTES = 4096
FAILURE_TAIL_LINES = 40  # what a person sees of a failed command's output (SPEC §5.7)


class CheckResult(StrictModel):
    """One descriptor run: passed iff exit 0, in time, within the output cap, tree unchanged."""

    check_id: str
    passed: bool
    exit_code: int | None
    duration_ms: Annotated[int, Field(ge=0)]
    timed_out: bool
    output_limited: bool
    changed_outside: list[str]
    output_tail: str
    error: str | None = None  # why it could not run at all (missing tool, bad cwd)


class Failure(StrictModel):
    """A command that failed, as a person needs to see it wherever the reason is shown: what
    ran, how it ended, and the last lines of its output with secret values masked."""

    step: str  # "executor", "lane_setup", or the check id "<task_id>:<acceptance id>"
    command: str  # the argv, shell-quoted for reading (it never ran through a shell)
    exit_code: int | None
    timeout_s: float | None = None  # set iff the command was killed at its timeout
    error: str | None = None  # why it could not run at all (missing tool, bad cwd)
    output_limited: bool = False
    changed_outside: list[str] = Field(default_factory=list)
    output_tail: str  # at most FAILURE_TAIL_LINES lines


class LaneOutcome(StrictModel):
    contract: Literal["imm_action/lane_outcome/v1"]
    batch_id: Identifier
    task_id: Identifier
    attempt: Annotated[int, Field(ge=0)]
    state: Literal["settled", "needs_human"]
    reason: str | None
    qa_failures: Annotated[int, Field(ge=0)]
    findings: list[CheckResult]
    lane_commit: GitOid | None
    # needs_human: why, shown as is; settled: what the last failed attempt failed (then fixed)
    failures: list[Failure] = Field(default_factory=list)


class CachedCheck(StrictModel):
    tree: GitOid
    descriptor_digest: Digest
    result: CheckResult


class CheckCache(StrictModel):
    """Descriptor runs already done in a batch, keyed by (tree, descriptor digest): stored in
    the batch's state commit so no pass, on any runner, runs the same check twice."""

    contract: Literal["imm_action/check_cache/v1"] = "imm_action/check_cache/v1"
    entries: list[CachedCheck] = Field(default_factory=list)


def parse_outcome(text: str) -> LaneOutcome | None:
    """The outcome in an outcome commit's `outcome.json`; None when it is not one (then the
    lane is treated as having published nothing)."""
    try:
        return LaneOutcome.model_validate_json(text)
    except ValidationError:
        return None


def lane_commit_message(task_id: str, subject: str, batch_id: str) -> str:
    """`imm(<task>): <subject>`, a blank line, and the batch trailer."""
    return f"imm({task_id}): {subject}\n\n{BATCH_TRAILER}: {batch_id}\n"


def carries_trailer(message: str, batch_id: str) -> bool:
    return f"{BATCH_TRAILER}: {batch_id}" in (line.strip() for line in message.splitlines())
