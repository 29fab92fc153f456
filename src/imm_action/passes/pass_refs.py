"""The refs a pass moves besides the batch state and the branch, in the state's own CAS: the
round's verify ref, and the lane branches and outcome refs of the lanes it admits or lands."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.git.refs import RefStore
from imm_action.git.repo import RefUpdate
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref, verify_ref
from imm_action.model.state import BatchChild, BatchRunState

LaneRefs = dict[str, tuple[tuple[str, str | None], tuple[str, str | None]]]


def verify_ref_update(
    refs: RefStore, before: BatchRunState, state: BatchRunState
) -> list[RefUpdate]:
    """The round's verify ref follows `verifying`: the top candidate while verify jobs run
    it, gone once its verdicts are taken (moved in the state's own CAS, so the two never
    disagree: a batch that never fanned out reads no ref for it)."""
    if before.verifying is None and state.verifying is None:
        return []
    ref = verify_ref(state.batch_id)
    old = refs.read([ref])[ref]
    new = state.verifying.top if state.verifying is not None else None
    return [] if old == new else [RefUpdate(ref, new, old)]


def stale_lane_refs(
    refs: RefStore, state: BatchRunState, admitted: Sequence[str]
) -> list[RefUpdate]:
    """A lane is admitted with no outcome and no lane branch: what an earlier attempt left
    (a parked lane that `imm retry` sent back) is deleted in the admission's CAS, or the
    next pass would take the old outcome for the new lane's."""
    names = [
        ref
        for task in admitted
        for ref in (
            heads(lane_branch(state.initiative_slug, task)),
            lane_outcome_ref(state.batch_id, task),
        )
    ]
    found = refs.read(names) if names else {}
    return [RefUpdate(ref, None, old) for ref, old in found.items() if old is not None]


def current_lane_refs(refs: RefStore, state: BatchRunState, ready: list[BatchChild]) -> LaneRefs:
    """Per ready child, its lane branch and outcome ref with where they point now (the
    branch only while it still holds the lane commit: anything else there is someone's)."""
    names = {
        child.task_id: (
            heads(lane_branch(state.initiative_slug, child.task_id)),
            lane_outcome_ref(state.batch_id, child.task_id),
        )
        for child in ready
    }
    found = refs.read(ref for pair in names.values() for ref in pair)
    lane_commits = {c.task_id: c.lane.lane_commit if c.lane else None for c in ready}
    return {
        task: (
            (branch, found[branch] if found[branch] == lane_commits[task] else None),
            (outcome, found[outcome]),
        )
        for task, (branch, outcome) in names.items()
    }
