"""Speculative lanes (issue 61, ADR 0072): a lane whose dependencies' lanes have committed but
not landed starts on a base holding their changes — the batch head with each one's lane commit
built on it in plan order, as candidates are built — instead of waiting for them to land. It
lands only after them, through the same guards; when one of them will not land as committed,
it is set back (`transitions.set_back_speculative`) and readmitted later from a head that
holds what did land."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from imm_action.git.candidate import Candidate, build_candidate
from imm_action.git.repo import GitRepo
from imm_action.integrate import transitions
from imm_action.integrate.decide import Admit
from imm_action.model.refs import lane_branch
from imm_action.model.state import BatchChild, BatchRunState, Runner


def speculative_base(
    repo: GitRepo, state: BatchRunState, head: str, dependencies: Sequence[str]
) -> str | None:
    """`head` with the lane commit of each of `dependencies` (committed, in plan order) built on
    it; None when one does not build on what is below it (a conflict): the lane waits for them
    to land instead."""
    children = {child.task_id: child for child in state.children}
    tip = head
    for task in dependencies:
        lane = children[task].lane
        if lane is None or lane.lane_commit is None:
            return None
        built = build_candidate(
            repo, tip, lane.base_head, lane.lane_commit, speculative=bool(lane.speculative_on)
        )
        if not isinstance(built, Candidate):
            return None
        tip = built.commit
    return tip


def waits_for_its_base(child: BatchChild, landing: Collection[str]) -> bool:
    """Whether a speculative lane's dependencies are not all landed, nor landing below it in
    the stack being built (`landing`): it lands only after them."""
    lane = child.lane
    if lane is None or not lane.speculative_on:
        return False
    return any(task not in landing for task in lane.speculative_on)


def admit_lanes(
    repo: GitRepo,
    state: BatchRunState,
    admits: Sequence[Admit],
    runner_for: Callable[[str], Runner],
) -> tuple[BatchRunState, tuple[str, ...], tuple[str, ...]]:
    """`state` with each of `admits` admitted on its base — a speculative lane's built here
    (one that does not build waits) — the tasks admitted, and the speculative bases the state
    commit must keep (a lane job fetches its base by id: it must stay reachable)."""
    started: list[str] = []
    keep: list[str] = []
    for admit in admits:
        base = admit.base_head
        if admit.speculative_on:
            built = speculative_base(repo, state, admit.base_head, admit.speculative_on)
            if built is None:
                continue
            base = built
            keep.append(base)
        branch = lane_branch(state.initiative_slug, admit.task_id)
        state = transitions.admit(
            state, admit.task_id, base, branch, runner_for(admit.task_id),
            speculative_on=admit.speculative_on,
        )  # fmt: skip
        started.append(admit.task_id)
    return state, tuple(started), tuple(keep)
