"""Building an integration candidate (SPEC §5.4) — objects only, no checkout.

This is git mechanics: it says *what git found* (wrong parents, a foreign merge base, conflicting
paths, a change that did not survive the merge). Which reason code that means for the batch is
decided in `imm_action.integrate.decide`.
"""

from __future__ import annotations

from dataclasses import dataclass

from imm_action.git.objects import CommitInfo, MergeResult
from imm_action.git.repo import GitRepo


@dataclass(frozen=True)
class Candidate:
    commit: str
    tree: str
    head: str  # the batch head it was built on
    lane_base: str
    lane_commit: str


@dataclass(frozen=True)
class LaneParentsWrong:
    """The lane commit does not have exactly one parent, the lane base."""

    parents: tuple[str, ...]


@dataclass(frozen=True)
class LaneBaseNotInHead:
    """The lane base is not an ancestor of the batch head."""


@dataclass(frozen=True)
class MergeBaseForeign:
    """The merge base of head and lane commit is not the lane base alone."""

    bases: tuple[str, ...]


@dataclass(frozen=True)
class MergeConflicts:
    paths: tuple[str, ...]


@dataclass(frozen=True)
class ChangeNotCarried:
    """The merged commit does not carry exactly the lane commit's change."""

    commit: str


BuildProblem = LaneParentsWrong | LaneBaseNotInHead | MergeBaseForeign | MergeConflicts
BuildResult = Candidate | BuildProblem | ChangeNotCarried


def build_candidate(
    repo: GitRepo, head: str, lane_base: str, lane_commit: str, *, speculative: bool = False
) -> BuildResult:
    """The lane commit rebuilt on `head`, proven to carry exactly the lane's change — or what
    stood in the way. `speculative`: the lane base is a base imm built for a speculative lane
    (the batch head it started from and its dependencies' lane commits, issue 61), never an
    ancestor of `head`: the lane's change is merged with that base as the merge base."""
    lane = repo.commit(lane_commit)
    if lane.parents != (lane_base,):
        return LaneParentsWrong(lane.parents)
    if head == lane_base:
        return Candidate(lane_commit, lane.tree, head, lane_base, lane_commit)
    if speculative and not repo.is_ancestor(lane_base, head):
        merged = _merge_with_base(repo, lane_base, head, lane)
        return _merged_on(repo, head, lane_base, lane_commit, merged, lane=lane)
    # `merge-tree --merge-base` needs git 2.40; on 2.39 we prove the merge base is the lane
    # base and let merge-tree find that same base itself. The batch's own history is usually a
    # plain chain of candidates since the lane base, which proves it without a process;
    # otherwise `merge-base --all` must name the lane base alone (which also proves the lane
    # base is an ancestor of the head).
    proven = repo.descends_linearly(head, lane_base, lane_commit)
    bases = [lane_base] if proven else repo.merge_bases(head, lane_commit)
    if bases != [lane_base]:
        if not repo.is_ancestor(lane_base, head):
            return LaneBaseNotInHead()
        return MergeBaseForeign(tuple(bases))
    merged = repo.merge_trees(head, lane_commit)
    return _merged_on(repo, head, lane_base, lane_commit, merged, lane=lane)


def _merge_with_base(repo: GitRepo, base: str, ours: str, lane: CommitInfo) -> MergeResult:
    """The three-way merge of `ours` and the `lane` commit with `base` as the merge base,
    whatever their histories: merge-tree of two commits of their trees on one root commit of
    `base`'s (git 2.39 has no `--merge-base`). Fixed dates: the same inputs give the same
    objects."""

    def commit_of(tree: str, parents: list[str], message: str) -> str:
        return repo.commit_tree(
            tree, parents, message, author=lane.author, author_date=lane.author_date,
            committer=lane.committer, committer_date=lane.committer_date,
        )  # fmt: skip

    root = commit_of(repo.commit(base).tree, [], "imm: a speculative lane's base")
    left = commit_of(repo.commit(ours).tree, [root], "imm: the batch head")
    right = commit_of(lane.tree, [root], "imm: the lane commit")
    return repo.merge_trees(left, right)


def _merged_on(
    repo: GitRepo,
    head: str,
    lane_base: str,
    lane_commit: str,
    merged: MergeResult,
    *,
    lane: CommitInfo,
) -> BuildResult:
    """The candidate of `merged` on `head`, proven to carry exactly `lane`'s change."""
    if merged.conflicts:
        return MergeConflicts(merged.conflicts)
    # Every input of the candidate is fixed by the lane commit and the head (the date too), so a
    # pass rerun after a crash rebuilds the very same commit id.
    commit = repo.commit_tree(
        merged.tree,
        [head],
        lane.message,
        author=lane.author,
        author_date=lane.author_date,
        committer=lane.committer,  # who the repository's config names (or imm-action)
        committer_date=lane.committer_date,
    )
    lane_change, candidate_change = repo.change_identities(
        [(lane_base, lane_commit), (head, commit)]
    )
    if lane_change != candidate_change:
        return ChangeNotCarried(commit)
    return Candidate(commit, merged.tree, head, lane_base, lane_commit)
