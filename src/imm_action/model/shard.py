"""A stack's checks fanned out across runners (issue 32, decision 0054): the shards a round's
verify jobs run, kept in the batch state, and the verdict file each verify job hands back."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from imm_action.model.common import Digest, GitOid, Identifier, StrictModel
from imm_action.model.outcome import CheckResult
from imm_action.text import plural

VERDICT_CONTRACT: Final = "imm_action/shard_verdict/v1"
MAX_SHARDS = 64  # verify jobs of one round (a matrix holds 256 jobs; lanes take their share)
MAX_SHARD_CHECKS = 4096  # (tree, check) pairs one round may owe
# the integrating runner's time a round's checks may take before they fan out
DEFAULT_FAN_OUT_SECONDS = 60


class OwedCheck(StrictModel):
    """One check a stack owes: a descriptor (by its digest and id) on one candidate's tree."""

    tree: GitOid
    check_id: Annotated[str, Field(max_length=200)]
    descriptor_digest: Digest
    expected_ms: Annotated[int, Field(ge=0)]  # its last recorded duration, or the default


class VerifyShard(StrictModel):
    """What one verify job runs; `index` counts from 1 over the run's shards, as the job's name
    shows it. `stage` 1: the stack's checks on its top; 2: the probes of its bisection, on
    the levels below (and what a stage 1 job that died left unanswered)."""

    index: Annotated[int, Field(ge=1, le=2 * MAX_SHARDS)]
    stage: Annotated[int, Field(ge=1, le=2)] = 1
    checks: Annotated[list[OwedCheck], Field(min_length=1, max_length=MAX_SHARD_CHECKS)]

    @property
    def expected_ms(self) -> int:
        return sum(check.expected_ms for check in self.checks)


class VerifyRound(StrictModel):
    """A round's verification fanned out: recorded by the stack job (stage 1) and the bisect
    job (stage 2), read by each verify job (its shard) and by the job that moves the branch
    (what it may accept, and from which run). `top` is the stack's top candidate commit,
    pushed to the round's verify ref: every tree the shards name is its tree or an
    ancestor's. `losses` counts rounds whose verify jobs left a shard without a verdict
    (decision 0054: retried like a lost lane)."""

    run_id: Annotated[int, Field(ge=1)]
    top: GitOid
    shards: Annotated[list[VerifyShard], Field(min_length=1, max_length=2 * MAX_SHARDS)]
    losses: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _numbered_in_order(self) -> VerifyRound:
        if [shard.index for shard in self.shards] != list(range(1, len(self.shards) + 1)):
            raise ValueError("shards are numbered 1, 2, ... in order")
        if [shard.stage for shard in self.shards] != sorted(s.stage for s in self.shards):
            raise ValueError("a stage's shards follow the stage before's")
        return self

    def of_stage(self, stage: int) -> list[VerifyShard]:
        return [shard for shard in self.shards if shard.stage == stage]

    @property
    def stage(self) -> int:
        return self.shards[-1].stage


class CheckVerdict(StrictModel):
    """One check's result on one tree, as a verify job found it (the result carries its
    duration and its bounded, masked output tail)."""

    tree: GitOid
    descriptor_digest: Digest
    result: CheckResult


class ShardVerdict(StrictModel):
    """The file a verify job writes outside the sandbox and uploads as an artifact of its run:
    `imm-verdict-<batch>-<run>-<shard>`. Only imm writes it; the job that moves the branch
    takes from it only what the round owed that shard (decision 0054)."""

    contract: Literal["imm_action/shard_verdict/v1"]
    batch_id: Identifier
    run_id: Annotated[int, Field(ge=1)]
    shard: Annotated[int, Field(ge=1, le=2 * MAX_SHARDS)]
    verdicts: Annotated[list[CheckVerdict], Field(max_length=MAX_SHARD_CHECKS)]


VERDICT_ARTIFACT_PREFIX: Final = "imm-verdict-"


def verdict_artifact(batch_id: str, run_id: int, shard: int) -> str:
    return f"{VERDICT_ARTIFACT_PREFIX}{batch_id}-{run_id}-{shard}"


def shard_line(verify: VerifyRound) -> str:
    """The round's verification as one line, for the status comment and the log."""
    shards = verify.of_stage(verify.stage)
    checks = sum(len(shard.checks) for shard in shards)
    what = "bisection probe" if verify.stage == 2 else "check"
    longest = max(shard.expected_ms for shard in shards) / 1000
    line = (
        f"verifying {plural(checks, what)} of the stack up to {verify.top[:12]} on "
        f"{plural(len(shards), 'runner')} (the longest shard about {longest:.0f} s)"
    )
    if verify.losses:
        line += (
            f"; verify jobs left a shard without a verdict {plural(verify.losses, 'time')}: "
            "the next round runs what it owed again"
        )
    return line
