"""What a step tells the Actions runner: outputs, the job summary, workflow-command annotations.

Formats: https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from imm_action.errors import Problem
from imm_action.model.intent import intent_path
from imm_action.model.refs import lane_branch
from imm_action.model.spend import summed
from imm_action.model.state import BatchRunState, ChildState

MAX_MATRIX_JOBS = 256  # GitHub: "A matrix can generate a maximum of 256 jobs per workflow run"
MAX_JOB_MINUTES = 360  # GitHub-hosted runners end a job after 6 h
MAX_OUTPUTS_BYTES = 1024 * 1024  # GitHub: outputs are limited to 1 MB per job
# A lane job's time outside imm's own limit: the checkout, Python, imm's install, the fetch and
# `check_setup` before; the lane's checks after its last executor run, the bundle and the
# upload after (decision 0050). GitHub's limit must leave imm's room to fire first: a lane
# that imm times out is parked with its reason; one GitHub cancels is lost and run again.
LANE_JOB_MARGIN_MINUTES = 15


def lane_minutes_on_github(lane_timeout_minutes: int) -> int:
    """The lane's own limit in a lane job: the config's, short enough that the job's limit
    (this plus the margin) stays within GitHub's 6 h."""
    return max(1, min(lane_timeout_minutes, MAX_JOB_MINUTES - LANE_JOB_MARGIN_MINUTES))


def lane_job_minutes(lane_timeout_minutes: int) -> int:
    """The lane job's `timeout-minutes`: the lane's limit plus the margin, at most 6 h."""
    return min(lane_minutes_on_github(lane_timeout_minutes) + LANE_JOB_MARGIN_MINUTES,
               MAX_JOB_MINUTES)  # fmt: skip


@dataclass(frozen=True)
class ActionsFiles:
    """The files the runner gave this step ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY)."""

    output: Path | None
    summary: Path | None


def output_lines(values: Mapping[str, str]) -> str:
    """`name<<DELIMITER` blocks: safe for any value, multi-line or not."""
    blocks = []
    for name, value in values.items():
        delimiter = f"imm_{uuid.uuid4().hex}"
        blocks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(blocks)


def write_outputs(files: ActionsFiles, values: Mapping[str, str]) -> None:
    if files.output is None:
        return
    text = output_lines(values)
    if len(text.encode()) > MAX_OUTPUTS_BYTES:
        raise ValueError(f"step outputs of {len(text.encode())} bytes exceed GitHub's 1 MB")
    with files.output.open("a", encoding="utf-8") as handle:
        handle.write(text)


def append_summary(files: ActionsFiles, markdown: str) -> None:
    if files.summary is None:
        return
    with files.summary.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n\n")


def matrix_entry(slug: str, task_id: str, slice_id: str, base: str) -> dict[str, str]:
    """One lane of a GitHub Actions matrix, the same shape from the plan job and from
    `imm plan --format matrix` (issue 24 #11): `task` and `base`, which the workflows read, and
    the lane's names."""
    return {
        "task": task_id, "base": base, "task_id": task_id, "slice_id": slice_id,
        "lane_branch": lane_branch(slug, task_id), "intent_path": intent_path(task_id),
    }  # fmt: skip


def lane_matrix(state: BatchRunState, admitted: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """The matrix of the lanes this pass admitted, in admission order."""
    children = {child.task_id: child for child in state.children}
    include = []
    for task_id in admitted[:MAX_MATRIX_JOBS]:
        child = children[task_id]
        if child.state is ChildState.LANE_ADMITTED and child.lane is not None:
            entry = matrix_entry(
                state.initiative_slug, task_id, child.slice_id, child.lane.base_head
            )
            include.append(entry)
    return {"include": include}


def pass_outputs(
    state: BatchRunState, admitted: Sequence[str], lane_timeout_minutes: int
) -> dict[str, str]:
    matrix = lane_matrix(state, admitted)
    return {
        "batch-id": state.batch_id,
        "batch-state": str(state.batch_state),
        "matrix": json.dumps(matrix, separators=(",", ":")),
        "has-lanes": "true" if matrix["include"] else "false",
        "max-parallel": str(min(state.max_parallel, MAX_MATRIX_JOBS)),
        "lane-timeout-minutes": str(lane_minutes_on_github(lane_timeout_minutes)),
        "lane-job-timeout-minutes": str(lane_job_minutes(lane_timeout_minutes)),
        **batch_outputs(state),
    }


def batch_outputs(state: BatchRunState) -> dict[str, str]:
    """What a workflow can use of the batch after a pass (issue 62): how many tasks are
    integrated, parked and waiting; what its agents cost and how many tokens, where they said
    ("" where none did); the last head every branch check passed on ("" where none did)."""
    children = state.children
    integrated = sum(1 for child in children if child.state.done)
    parked = sum(1 for child in children if child.state is ChildState.NEEDS_HUMAN)
    spend = summed(child.spend for child in children)
    verdicts = state.branch_verdicts
    green = bool(verdicts) and all(verdict.passed for verdict in verdicts)
    return {
        "integrated": str(integrated),
        "parked": str(parked),
        "waiting": str(len(children) - integrated - parked),
        "cost-usd": f"{spend.cost_usd:.2f}" if spend.known else "",
        "tokens": str(spend.tokens) if spend.tokens else "",
        "green-head": verdicts[0].head if green else "",
    }


def verify_outputs(state: BatchRunState, run_id: int, stage: int) -> dict[str, str]:
    """The stack job's (stage 1) or the bisect job's (stage 2): its verify jobs' matrix (issue
    32), one entry per shard of the stage it added in this run, labelled so the Actions UI
    reads `imm verify 2/8 @ 1a2b3c4d5e6f`; empty when it added none."""
    fanned = state.round_of(run_id)  # not always the newest: rounds overlap (ADR 0075)
    shards = fanned.of_stage(stage) if fanned is not None and fanned.stage == stage else []
    top = fanned.top[:12] if fanned is not None else ""
    include = [
        {"shard": str(shard.index), "label": f"{number}/{len(shards)}", "top": top,
         "checks": str(len(shard.checks))}
        for number, shard in enumerate(shards, start=1)
    ]  # fmt: skip
    return {
        "verify-matrix": json.dumps({"include": include}, separators=(",", ":")),
        "has-verify": "true" if include else "false",
    }


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(problem: Problem, level: str = "error") -> str:
    """`::error file=P,line=N::message` — shown at the file and line in the run and the PR."""
    where = f"file={_escape_property(problem.path)}"
    if problem.line is not None:
        where += f",line={problem.line}"
    return f"::{level} {where}::{_escape_data(problem.message)}"
