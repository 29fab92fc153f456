"""Where a batch lives in git (SPEC §5.5): the names of its refs and branches."""

from __future__ import annotations

BATCHES = "refs/imm/batches/"
LANES = "refs/imm/lanes/"
LATEST = "refs/imm/latest/"
QUARANTINE = "refs/imm/quarantine/"
VERIFY = "refs/imm/verify/"


def batch_state_ref(batch_id: str) -> str:
    return f"{BATCHES}{batch_id}"


def latest_batch_ref(slug: str) -> str:
    """The first state commit of the initiative's newest batch: every batch start moves it
    with a lease, so two passes that both decided to start one cannot both succeed."""
    return f"{LATEST}{slug}"


def lane_outcome_ref(batch_id: str, task_id: str) -> str:
    return f"{LANES}{batch_id}/{task_id}"


def batch_branch(slug: str) -> str:
    return f"imm/{slug}"


def lane_branch(slug: str, task_id: str) -> str:
    return f"imm-lane/{slug}/{task_id}"


def heads(branch: str) -> str:
    return f"refs/heads/{branch}"


def quarantine_ref(batch_id: str, number: int) -> str:
    """Where a foreign commit refused on the batch branch is kept (SPEC §5.4): never lost,
    never on the branch people merge."""
    return f"{QUARANTINE}{batch_id}/{number}"


def verify_ref(batch_id: str) -> str:
    """The top candidate of a stack fanned out to verify jobs (decision 0054): what they fetch;
    every tree a shard names is its tree or an ancestor's."""
    return f"{VERIFY}{batch_id}"
