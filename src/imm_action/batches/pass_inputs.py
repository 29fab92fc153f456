"""What a pass is given: its request (the plan, the base, the tasks earlier batches settled)
and its ports (refs, lanes, the verifier). Apart from `repo.py` so that the commands that run
no pass (`imm lane`, `imm verify`, `imm status`) never load the pass and its decisions."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping, Sequence

from imm_action.batches.repo import BatchRepo, base_of, committer_of, new_batch_id, now
from imm_action.carriers.intents import IntentFile, plan_cover_warnings
from imm_action.errors import InputError, Problem
from imm_action.git.repo import GitRepo
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.reasons import OPEN_LANE_NETWORK
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.lanes.local import LocalLanes
from imm_action.lanes.runners import LaneRunners
from imm_action.masking import NO_MASK, Masker
from imm_action.model.config import RepoConfig
from imm_action.model.intent import intent_path
from imm_action.model.plan import BatchPlan
from imm_action.model.refs import batch_branch, heads
from imm_action.model.state import BatchState, SettledTask
from imm_action.passes.observe import CandidateMemo
from imm_action.passes.request import PassPorts, PassRequest
from imm_action.plan.project import REASON_INVALID_INTENT as INVALID_INTENT
from imm_action.text import listed, plural
from imm_action.verify.check_setup import CheckPlace
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache
from imm_action.workspace import config_path, plan_initiative, scopes_of


def pass_request(
    batch_repo: BatchRepo,
    slug: str,
    *,
    batch_id: str | None,
    admit: bool,
    authorized_by: str | None = None,
    start: bool = True,
    stopped: Stopped = Stopped.RESUME,
    retry: str | None = None,
    plans: PlanMemo | None = None,
) -> PassRequest:
    """`plans`: plans made earlier in this run; a plan is made again only when its inputs (the
    commit the batch starts from, the tasks earlier batches integrated) change."""
    batch_repo.refs.refresh()
    store = StateStore(batch_repo.refs)
    base_ref, base_head = base_of(batch_repo)
    batches = store.batches_of(slug)  # one listing of the batch refs for both
    # A task an earlier batch integrated is settled only if that work is on the line the new
    # batch builds on (issue 41 #1): the base for a fresh start; else the base or the batch
    # branch, which a continuation or a resume goes on from. Work only an archived (replaced,
    # never merged) branch holds runs again, in every batch that follows the --fresh.
    lines = [base_head]
    if stopped is not Stopped.FRESH:
        branch = batch_repo.refs.read([heads(batch_branch(slug))])[heads(batch_branch(slug))]
        lines += [branch] if branch is not None and branch != base_head else []
    settled = reached_by(batch_repo.repo, lines, integrated_before(store, slug, batches))
    before = {task: known.batch_id for task, known in settled.items()}
    issue = recorded_issue(store, slug, batches)
    key = (slug, base_head, issue, tuple(sorted(before.items())))
    known = plans.get(key) if plans is not None else None
    if known is None:
        plan, intents = plan_initiative(
            batch_repo.root,
            slug,
            batch_repo.config,
            integrated_before=before,
            initiatives=batch_repo.initiatives,
            issue=issue,
            commit=base_head,  # the commit the batch starts from, never the working tree
        )
        refuse_left_out(plan, intents)
        known = (plan, scopes_of(intents), plan_cover_warnings(plan, intents))
        if plans is not None:
            plans.clear()  # only the newest inputs matter
            plans[key] = known
    plan, scopes, conflicts = known
    return PassRequest(
        slug=slug,
        plan=plan,
        scopes=scopes,
        base_ref=base_ref,
        base_head=base_head,
        authorized_by=authorized_by or f"local:{getpass.getuser()}",
        new_batch_id=new_batch_id(slug),
        batch_id=batch_id,
        admit=admit,
        start=start,
        barrier_globs=tuple(batch_repo.config.barrier_files),
        speculative_lanes=batch_repo.config.speculative_lanes,
        stopped=stopped,
        retry=retry,
        committer=committer_of(batch_repo.config),
        config_file=config_path(),
        max_cost_usd=batch_repo.config.max_cost_usd,
        settled=tuple(settled.values()),
        scope_conflicts=conflicts,
    )


def refuse_left_out(plan: BatchPlan, intents: Mapping[str, IntentFile]) -> None:
    """No task disappears (issue 28): an initiative with a task whose intent is missing or
    invalid runs no lane at all. Every such file is named with its line, as `imm check` does."""
    left_out = [child.task_id for child in plan.children if child.reason and
                child.reason.startswith(INVALID_INTENT)]  # fmt: skip
    if not left_out:
        return
    problems = [
        problem
        for task_id in left_out
        for problem in (
            intents[task_id].problems
            if task_id in intents and intents[task_id].problems
            else (Problem(intent_path(task_id), None, "is missing"),)
        )
    ]
    raise InputError(
        [
            *problems,
            Problem(
                problems[0].path,
                problems[0].line,
                f"no lane starts while {plural(len(left_out), 'task')} of {plan.initiative} "
                f"{'has' if len(left_out) == 1 else 'have'} no valid intent "
                f"({listed(left_out)}); fix {'it' if len(left_out) == 1 else 'them'}, commit, "
                "and run again (imm check lists the same)",
            ),
        ]
    )


PlanKey = tuple[str, str, int | None, tuple[tuple[str, str], ...]]
PlanMemo = dict[
    PlanKey, tuple[BatchPlan, Mapping[str, tuple[str, ...]], tuple[tuple[str, str], ...]]
]


def recorded_issue(
    store: StateStore, slug: str, batches: Sequence[StoredBatch] | None = None
) -> int | None:
    """The issue the newest batch of `slug` recorded as carrying it: read by number, not
    looked for again. `batches`: the slug's batches, when read already."""
    batches = store.batches_of(slug) if batches is None else batches
    return batches[-1].state.carrier.issue if batches else None


def integrated_before(
    store: StateStore, slug: str, batches: Sequence[StoredBatch] | None = None
) -> list[SettledTask]:
    """Every task a completed batch of `slug` integrated, with its commit, newest batch first:
    a new batch classifies those on its line `already_settled` (`reached_by`)."""
    integrated: list[SettledTask] = []
    for batch in reversed(store.batches_of(slug) if batches is None else batches):
        if batch.state.batch_state is BatchState.COMPLETED:
            batch_id = batch.state.batch_id
            integrated.extend(
                SettledTask(task_id=c.task_id, batch_id=batch_id, commit=c.commit)
                for c in batch.state.children
                if c.state.done and c.commit
            )
    return integrated


def reached_by(
    repo: GitRepo, lines: Sequence[str], integrated: Sequence[SettledTask]
) -> dict[str, SettledTask]:
    """Per task, the newest of `integrated` whose commit one of the heads in `lines` holds (a
    task two batches did counts when either's work is on the line)."""
    settled: dict[str, SettledTask] = {}
    for known in integrated:
        if known.task_id not in settled and any(
            repo.is_ancestor(known.commit, head) for head in lines
        ):
            settled[known.task_id] = known
    return settled


def pass_ports(
    batch_repo: BatchRepo,
    log: Callable[[str], None],
    *,
    path_env: str,
    lanes: LaneRunners | None = None,
    mask: Masker = NO_MASK,
    candidates: CandidateMemo | None = None,
    place: CheckPlace | None = None,
) -> PassPorts:
    def verifier(cache: ResultCache) -> Verifier:
        # check output may quote what an executor wrote into the tree: secrets masked
        workers = batch_repo.config.verify_parallel
        return Verifier(
            batch_repo.repo, cache, path_env=path_env, workers=workers, mask=mask, place=place
        )

    return PassPorts(
        refs=batch_repo.refs,
        lanes=lanes or LocalLanes(os.getpid()),
        verifier=verifier,
        clock=now,
        log=log,
        candidates=candidates,
        unconfined=None if place is None else _unconfined(place, batch_repo.config),
    )


def _unconfined(place: CheckPlace, config: RepoConfig) -> str | None:
    """Why lane code runs unconfined here, else whether its executors reach any host (issue 60:
    said where unconfined lanes are)."""
    if place.confinement.unconfined_reason:
        return place.confinement.unconfined_reason
    return OPEN_LANE_NETWORK if config.lane_network == "open" else None
