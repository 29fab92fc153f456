"""A lane's outcome in git: `refs/imm/lanes/<batch>/<task>` and the lane branch, moved together."""

from __future__ import annotations

from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, GitRepo, RefUpdate
from imm_action.model.common import canonical_model_text
from imm_action.model.outcome import OUTCOME_FILE, LaneOutcome, parse_outcome
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref


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
    """The outcome held by an outcome commit; None when it is unreadable."""
    text = repo.read_file(commit, OUTCOME_FILE)
    return None if text is None else parse_outcome(text)
