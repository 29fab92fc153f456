"""A lane job in three steps, so the step that runs the executor holds no token (SPEC §7):
fetch (token) → work (no token; the outcome's ref moves are written down) → publish (token).

The file between work and publish lies where the executor could have written it, so publish
trusts nothing in it but object ids: it pushes only this lane's two refs, and only an outcome
commit that parses as this lane's outcome. The integrator re-checks the lane commit anyway
(lanes are untrusted, §5.4).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.git.refs import RemoteRefStore
from imm_action.git.repo import RefUpdate
from imm_action.lanes.outcome import read_outcome
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref

HANDOFF_FILE = "imm-lane-publish.json"


def handoff_path(git_dir: Path, batch_id: str, task_id: str) -> Path:
    return git_dir / f"{batch_id}.{task_id}.{HANDOFF_FILE}"


class DeferredRefStore:
    """The work step's refs: what the fetch step mirrored from the remote; a CAS is written
    to the hand-off file for the publish step instead of being pushed."""

    def __init__(self, remote: RemoteRefStore, handoff: Path) -> None:
        self.repo = remote.repo
        self._remote = remote
        self._handoff = handoff

    def refresh(self) -> None:
        return None  # the fetch step did it; this step has no token

    def read(self, names: Iterable[str]) -> dict[str, str | None]:
        return self._remote.read(names)

    def list(self, prefix: str) -> dict[str, str]:
        return self._remote.list(prefix)

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        data = [{"ref": u.ref, "new": u.new, "old": u.old} for u in updates]
        self._handoff.write_text(json.dumps(data), encoding="utf-8")


def publish_handoff(
    remote: RemoteRefStore, handoff: Path, slug: str, batch_id: str, task_id: str
) -> str:
    """Push what the work step wrote down, in one atomic push; returns the outcome commit."""
    if not handoff.is_file():
        raise UsageError(
            f"lane {task_id} published nothing: its work step ended before writing an outcome"
        )
    outcome_ref = lane_outcome_ref(batch_id, task_id)
    branch_ref = heads(lane_branch(slug, task_id))
    updates = _updates(handoff.read_text(encoding="utf-8"), {outcome_ref, branch_ref})
    by_ref = {update.ref: update for update in updates}
    outcome_update = by_ref.get(outcome_ref)
    if outcome_update is None or outcome_update.new is None:
        raise UsageError(f"lane {task_id}: the hand-off holds no outcome")
    outcome = read_outcome(remote.repo, outcome_update.new)
    if outcome is None or (outcome.batch_id, outcome.task_id) != (batch_id, task_id):
        raise UsageError(f"lane {task_id}: the hand-off's outcome is not this lane's")
    branch_update = by_ref.get(branch_ref)
    if branch_update is not None and branch_update.new != outcome.lane_commit:
        raise UsageError(f"lane {task_id}: the hand-off moves the lane branch elsewhere")
    remote.compare_and_swap(updates)
    handoff.unlink()
    return outcome_update.new


def _updates(text: str, allowed: set[str]) -> list[RefUpdate]:
    try:
        raw = json.loads(text)
        updates = [RefUpdate(str(i["ref"]), i["new"], i["old"]) for i in raw]
    except (ValueError, TypeError, KeyError):
        raise UsageError("the lane hand-off file is unreadable") from None
    for update in updates:
        if update.ref not in allowed:
            raise UsageError(f"the lane hand-off names a ref it may not move: {update.ref}")
        for oid in (update.new, update.old):
            if oid is not None and not (isinstance(oid, str) and len(oid) == 40):
                raise UsageError("the lane hand-off holds an invalid object id")
    return updates
