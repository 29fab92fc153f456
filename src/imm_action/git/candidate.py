"""Building and proving an integration candidate (SPEC §5.4) — objects only, no checkout."""

from __future__ import annotations

from dataclasses import dataclass

from imm_action.git.repo import GitRepo

LINEAGE_BROKEN = "batch_head_lineage_broken"
CONFLICT = "batch_integration_conflict"
CHECK_FAILED = "batch_integration_check_failed"
BATCH_TRAILER = "Immune-Brain-Batch"


class IntegrationRefused(Exception):
    """A lane commit that must not land; `code` is the reason code a person and scripts read."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        super().__init__(f"{code}: {detail}")


@dataclass(frozen=True)
class Candidate:
    commit: str
    tree: str
    head: str  # the batch head it was built on
    lane_base: str
    lane_commit: str


def build_candidate(repo: GitRepo, head: str, lane_base: str, lane_commit: str) -> Candidate:
    """The lane commit rebuilt on `head`, proven to carry exactly the lane's change."""
    lane = repo.commit(lane_commit)
    if len(lane.parents) != 1:
        raise IntegrationRefused(
            LINEAGE_BROKEN,
            f"lane commit {lane_commit} has {len(lane.parents)} parents, expected exactly one",
        )
    if lane.parents[0] != lane_base:
        raise IntegrationRefused(
            LINEAGE_BROKEN, f"lane commit {lane_commit} does not descend from lane base {lane_base}"
        )
    if head == lane_base:
        return Candidate(lane_commit, lane.tree, head, lane_base, lane_commit)
    # `merge-tree --merge-base` needs git 2.40; on 2.39 we prove the merge base is the lane
    # base and let merge-tree find that same base itself. The batch's own history is usually a
    # plain chain of candidates since the lane base, which proves it without a process;
    # otherwise `merge-base --all` must name the lane base alone (which also proves the lane
    # base is an ancestor of the head).
    proven = repo.descends_linearly(head, lane_base, lane_commit)
    bases = [lane_base] if proven else repo.merge_bases(head, lane_commit)
    if bases != [lane_base]:
        if not repo.is_ancestor(lane_base, head):
            raise IntegrationRefused(
                LINEAGE_BROKEN, f"lane base {lane_base} is not an ancestor of batch head {head}"
            )
        raise IntegrationRefused(
            LINEAGE_BROKEN,
            f"merge base of {head} and {lane_commit} is {', '.join(bases) or 'none'}, "
            f"not the lane base {lane_base}",
        )
    merged = repo.merge_trees(head, lane_commit)
    if merged.conflicts:
        raise IntegrationRefused(
            CONFLICT,
            f"lane commit {lane_commit} conflicts with batch head {head} in: "
            + ", ".join(merged.conflicts),
        )
    # Every input of the candidate is fixed by the lane commit and the head (the date too), so a
    # pass rerun after a crash rebuilds the very same commit id.
    commit = repo.commit_tree(
        merged.tree,
        [head],
        lane.message,
        author=lane.author,
        author_date=lane.author_date,
        committer_date=lane.committer_date,
    )
    lane_change, candidate_change = repo.change_identities(
        [(lane_base, lane_commit), (head, commit)]
    )
    if lane_change != candidate_change:
        raise IntegrationRefused(
            CONFLICT,
            f"candidate {commit} does not carry exactly the change of lane commit {lane_commit}",
        )
    return Candidate(commit, merged.tree, head, lane_base, lane_commit)


def carries_trailer(message: str, batch_id: str) -> bool:
    return f"{BATCH_TRAILER}: {batch_id}" in (line.strip() for line in message.splitlines())


def find_orphaned_integration(
    repo: GitRepo,
    *,
    task_id: str,
    batch_id: str,
    start: str,
    end: str,
    lane_base: str,
    lane_commit: str,
) -> str | None:
    """A commit in `start..end` that integrated this lane but was never recorded: subject
    `imm(<task>):`, this batch's trailer, and the very change of the lane commit."""
    lane_change = None
    for commit in repo.commits_between(start, end):
        info = repo.commit(commit)
        if not info.subject.startswith(f"imm({task_id}):") or not carries_trailer(
            info.message, batch_id
        ):
            continue
        if len(info.parents) != 1:
            continue
        lane_change = lane_change or repo.change_identity(lane_base, lane_commit)
        if repo.change_identity(info.parents[0], commit) == lane_change:
            return commit
    return None
