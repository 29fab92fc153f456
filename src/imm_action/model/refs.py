"""Where a batch lives in git (SPEC §5.5): the names of its refs and branches."""

from __future__ import annotations

BATCHES = "refs/imm/batches/"
LANES = "refs/imm/lanes/"


def batch_state_ref(batch_id: str) -> str:
    return f"{BATCHES}{batch_id}"


def lane_outcome_ref(batch_id: str, task_id: str) -> str:
    return f"{LANES}{batch_id}/{task_id}"


def batch_branch(slug: str) -> str:
    return f"imm/{slug}"


def lane_branch(slug: str, task_id: str) -> str:
    return f"imm-lane/{slug}/{task_id}"


def heads(branch: str) -> str:
    return f"refs/heads/{branch}"
