"""A lane's outcome in git: `refs/imm/lanes/<batch>/<task>` and the lane branch, moved together."""

from __future__ import annotations

from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, GitRepo, RefUpdate
from imm_action.model.common import canonical_model_text
from imm_action.model.outcome import OUTCOME_FILE, OUTCOME_MAX_BYTES, LaneOutcome, parse_outcome
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref
from imm_action.text import last_bytes


def publish_outcome(refs: RefStore, slug: str, outcome: LaneOutcome, now_git_date: str) -> str:
    """Write the outcome commit (its parent is the lane commit, so fetching the outcome ref
    brings the lane's work along) and move the lane branch and the outcome ref in one CAS."""
    repo = refs.repo
    tree = repo.write_tree({OUTCOME_FILE: canonical_model_text(fitted(outcome))})
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


def fitted(outcome: LaneOutcome) -> LaneOutcome:
    """The outcome within OUTCOME_MAX_BYTES: a lane with hundreds of failing checks keeps each
    check's verdict and a shorter tail of its output (what it printed is in the lane log)."""
    for tail in (None, SHORT_TAIL_BYTES, 0):
        if tail is not None:
            findings = [
                f.model_copy(update={"output_tail": last_bytes(f.output_tail, tail)})
                for f in outcome.findings
            ]
            outcome = outcome.model_copy(update={"findings": findings})
        if len(canonical_model_text(outcome).encode("utf-8")) <= OUTCOME_MAX_BYTES:
            return outcome
    raise ValueError(
        f"the outcome of lane {outcome.task_id} does not fit in {OUTCOME_MAX_BYTES} bytes"
    )


SHORT_TAIL_BYTES = 256


def read_outcome(repo: GitRepo, commit: str) -> LaneOutcome | None:
    """The outcome held by an outcome commit; None when it is unreadable."""
    text = repo.read_file(commit, OUTCOME_FILE)
    return None if text is None else parse_outcome(text)
