"""A lane's outcome in git: `refs/imm/lanes/<batch>/<task>` and the lane branch, moved together."""

from __future__ import annotations

from pydantic import ValidationError

from imm_action.git.repo import IMM_IDENTITY, GitRepo, RefUpdate
from imm_action.integrate.refs import RefStore, heads, lane_branch, lane_outcome_ref
from imm_action.model.common import canonical_model_text
from imm_action.model.outcome import LaneOutcome

OUTCOME_FILE = "outcome.json"


def publish_outcome(refs: RefStore, slug: str, outcome: LaneOutcome, now_git_date: str) -> str:
    """Write the outcome commit (its parent is the lane commit, so fetching the outcome ref
    brings the lane's work along) and move the lane branch and the outcome ref in one CAS."""
    repo = refs.repo
    tree = repo.write_tree({OUTCOME_FILE: canonical_model_text(outcome)})
    parents = [outcome.lane_commit] if outcome.lane_commit else []
    commit = repo.commit_tree(
        tree,
        parents,
        f"imm lane outcome {outcome.task_id}: {outcome.state}\n",
        author=IMM_IDENTITY,
        author_date=now_git_date,
        committer_date=now_git_date,
    )
    outcome_ref = lane_outcome_ref(outcome.batch_id, outcome.task_id)
    branch_ref = heads(lane_branch(slug, outcome.task_id))
    current = refs.read([outcome_ref, branch_ref])
    updates = [RefUpdate(outcome_ref, commit, current[outcome_ref])]
    if outcome.lane_commit:
        updates.append(RefUpdate(branch_ref, outcome.lane_commit, current[branch_ref]))
    refs.compare_and_swap(updates)
    return commit


def read_outcome(repo: GitRepo, commit: str) -> LaneOutcome | None:
    """The outcome held by an outcome commit; None when it is unreadable (then the lane is
    treated as having published nothing)."""
    text = repo.read_file(commit, OUTCOME_FILE)
    if text is None:
        return None
    try:
        return LaneOutcome.model_validate_json(text)
    except ValidationError:
        return None
