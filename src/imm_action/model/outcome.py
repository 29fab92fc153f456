"""What a lane publishes when it ends (`refs/imm/lanes/<batch>/<task>`), and check results."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from imm_action.model.common import Digest, GitOid, Identifier, StrictModel

OUTCOME_CONTRACT: Final = "imm_action/lane_outcome/v1"
OUTPUT_TAIL_BYTES = 4096


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


class CachedCheck(StrictModel):
    tree: GitOid
    descriptor_digest: Digest
    result: CheckResult


class CheckCache(StrictModel):
    """Descriptor runs already done in a batch, keyed by (tree, descriptor digest): stored in
    the batch's state commit so no pass, on any runner, runs the same check twice."""

    contract: Literal["imm_action/check_cache/v1"] = "imm_action/check_cache/v1"
    entries: list[CachedCheck] = Field(default_factory=list)
