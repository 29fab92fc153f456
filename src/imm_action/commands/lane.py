"""`imm lane --batch-id ID --task TASK`: run one admitted lane; publish or bundle its outcome."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from imm_action.actions.runtime import (
    ActionsFiles,
    append_summary,
    lane_minutes_on_github,
    write_outputs,
)
from imm_action.actions.summary import lane_summary
from imm_action.batches.repo import (
    BatchRepo,
    check_place,
    committer_of,
    config_warning_lines,
    open_batch_repo,
    planned_config,
    setup_cache_outputs,
)
from imm_action.console import CommandIO
from imm_action.credentials import token
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, UsageError
from imm_action.git.refs import RefStore, RemoteRefStore
from imm_action.integrate.store import StateStore
from imm_action.lanes.bundles import lane_artifact_name
from imm_action.lanes.handoff import (
    DeferredRefStore,
    check_lane_refs,
    handoff_path,
    publish_handoff,
    read_handoff,
    write_lane_bundle,
)
from imm_action.lanes.local import spend_file_of
from imm_action.lanes.run import LaneSpec, run_lane
from imm_action.masking import masker_for
from imm_action.model.state import BatchRunState, ChildState, Lane
from imm_action.passes.gate import BranchGate, branch_checks_of
from imm_action.passes.intent_checks import plan_paths
from imm_action.ports import Ports
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache
from imm_action.workspace import config_path


@dataclass(frozen=True)
class LaneArgs:
    batch_id: str
    task_id: str
    repo: Path
    remote: str | None
    executor: str | None
    log: Path | None
    environment: Mapping[str, str]
    # "all" does everything in this process; on GitHub the lane job runs "fetch" (read token),
    # "work" (the executor; no token) and "bundle" (no token: the hand-off as a git bundle the
    # integrate job imports) as separate steps. "publish" pushes the hand-off (manual use).
    phase: str = "all"
    lane_setup: str | None = None
    actions: ActionsFiles | None = None
    bundle: Path | None = None  # --phase bundle: where to write it


def run(args: LaneArgs, ports: Ports, opened: BatchRepo | None = None) -> int:
    """`opened`: the batch repository, when the caller has it open already (a lane forked
    from `imm run`), instead of finding it again from `args.repo`."""
    io, initiatives = ports.io, ports.initiatives
    batch_repo = opened or open_batch_repo(args.repo, args.remote, initiatives)
    if opened is None:  # a lane `imm run` forked: it printed them once for every lane
        for line in config_warning_lines(batch_repo):
            io.warn(line)
    if args.phase == "all":
        batch_repo.refs.refresh()
        _fetch_plan_commit(args, batch_repo)
        return _work(args, io, batch_repo, batch_repo.refs)
    if not isinstance(batch_repo.refs, RemoteRefStore):
        raise UsageError(f"--phase {args.phase} needs --remote (the refs live on a remote)")
    handoff = handoff_path(batch_repo.repo.git_directory(), args.batch_id, args.task_id)
    if args.phase == "fetch":
        batch_repo.refs.refresh()
        read = _fetch_plan_commit(args, batch_repo)  # the work step holds no token to fetch it
        if args.actions is not None and read is not None:  # for the job's cache steps
            state, planned = read
            write_outputs(
                args.actions, setup_cache_outputs(planned, state.judged_at, args.environment)
            )
        io.warn(f"imm lane {args.task_id}: fetched batch {args.batch_id}")
        return EXIT_OK
    if args.phase == "work":
        handoff.unlink(missing_ok=True)
        return _work(args, io, batch_repo, DeferredRefStore(batch_repo.refs, handoff))
    if args.phase == "bundle":
        return _bundle(args, io, batch_repo, handoff)
    state, _ = _admitted_lane(args, batch_repo.refs)
    commit = publish_handoff(
        batch_repo.refs, handoff, state.initiative_slug, args.batch_id, args.task_id
    )
    io.warn(f"imm lane {args.task_id}: published outcome {commit}")
    return EXIT_OK


def _bundle(args: LaneArgs, io: CommandIO, batch_repo: BatchRepo, handoff: Path) -> int:
    """The hand-off's refs as a git bundle (no token needed: the integrate job imports it,
    holding it to the same rules as publish). Outputs `artifact` (its name) and `bundle`."""
    if args.bundle is None:
        raise UsageError("--phase bundle needs --bundle FILE")
    state, lane = _admitted_lane(args, batch_repo.refs)
    child = next(c for c in state.children if c.task_id == args.task_id)
    slug = state.initiative_slug
    updates = read_handoff(handoff, slug, args.batch_id, args.task_id)
    moves = {u.ref: u.new for u in updates}
    check_lane_refs(batch_repo.repo, moves, slug, args.batch_id, args.task_id)
    write_lane_bundle(batch_repo.repo, updates, args.bundle, exclude=[lane.base_head])
    name = lane_artifact_name(args.batch_id, args.task_id, child.attempts)
    if args.actions is not None:
        write_outputs(args.actions, {"artifact": name, "bundle": str(args.bundle)})
    io.warn(f"imm lane {args.task_id}: bundled its outcome in {args.bundle} ({name})")
    return EXIT_OK


def _admitted_lane(args: LaneArgs, refs: RefStore) -> tuple[BatchRunState, Lane]:
    stored = StateStore(refs).load(args.batch_id)
    if stored is None:
        raise UsageError(f"no batch {args.batch_id}")
    state = stored.state
    child = next((c for c in state.children if c.task_id == args.task_id), None)
    if child is None:
        raise UsageError(f"batch {args.batch_id} has no task {args.task_id}")
    if child.state is not ChildState.LANE_ADMITTED or child.lane is None:
        raise UsageError(f"task {args.task_id} is {child.state}, not lane_admitted")
    return state, child.lane


def _work(args: LaneArgs, io: CommandIO, batch_repo: BatchRepo, refs: RefStore) -> int:
    state, lane = _admitted_lane(args, refs)
    child = next(c for c in state.children if c.task_id == args.task_id)
    batch_repo = replace(batch_repo, config=planned_config(batch_repo, state, lane.base_head))
    executor = args.executor or batch_repo.config.executor
    if not executor:
        raise UsageError("no executor: pass --executor or set executor in .github/imm.yml")
    spec = LaneSpec(
        slug=state.initiative_slug,
        batch_id=state.batch_id,
        task_id=child.task_id,
        slice_id=child.slice_id,
        base_head=lane.base_head,
        attempt=child.attempts,
        qa_failure_limit=state.budget.qa_failure_limit,
        executor=executor,
        lane_setup=args.lane_setup or batch_repo.config.lane_setup,
        timeout_s=_lane_minutes(args, batch_repo.config.lane_timeout_minutes) * 60.0,
        executor_env=tuple(batch_repo.config.executor_env),
        committer=committer_of(batch_repo.config),
        # the plan's files and the scripts its branch checks run (issue 58), as the config the
        # job checked out says: the lane's own early refusal (the integrator reads the plan's)
        plan_paths=plan_paths(state, config_path())
        | frozenset(BranchGate(branch_checks_of(batch_repo.config)).scripts),
        executor_report=batch_repo.config.executor_report,
        lane_network=batch_repo.config.lane_network,
        spend_file=spend_file_of(args.log) if args.log else None,
    )
    log: TextIO = args.log.open("a", encoding="utf-8", buffering=1) if args.log else sys.stdout
    path_env = args.environment.get("PATH", "")
    try:
        # the lane's checks run where and with what the integrator's do (SPEC §8): the same
        # sandbox, the same check_setup (reused: prepared before, for this base's lockfiles)
        place = check_place(
            batch_repo, path_env, lambda line: print(f"imm: {line}", file=log, flush=True),
            holds_token=token() is not None, setup_at=_setup_commit(batch_repo, state),
        )  # fmt: skip
        try:
            verifier = Verifier(batch_repo.repo, ResultCache(), path_env=path_env,
                                mask=masker_for(args.environment), place=place)  # fmt: skip
            result = run_lane(
                spec,
                refs,
                verifier,
                environment=args.environment,
                log=log,
                git_date=_git_now,
                confinement=place.confinement,
            )
        finally:
            place.close()
    finally:
        if args.log:
            log.close()
    outcome = result.outcome
    if args.actions is not None:
        append_summary(args.actions, lane_summary(outcome))
    if outcome.state == "settled":
        io.warn(f"imm lane {args.task_id}: committed {outcome.lane_commit}")
        return EXIT_OK
    io.warn(f"imm lane {args.task_id}: needs a person: {outcome.reason}")
    return EXIT_NEEDS_HUMAN


def _fetch_plan_commit(
    args: LaneArgs, batch_repo: BatchRepo
) -> tuple[BatchRunState, BatchRepo] | None:
    """A lane job's clone holds only the lane's base (`fetch-depth: 1`): the plan's commit,
    where `check_setup` runs, is fetched by its id where it is missing and setup is set. What
    it read — the batch state, and the batch repository with the plan's config — or None for
    a local batch, whose repository holds the plan's commit (nothing read)."""
    refs = batch_repo.refs
    if not isinstance(refs, RemoteRefStore):
        return None
    state, lane = _admitted_lane(args, refs)
    planned = replace(batch_repo, config=planned_config(batch_repo, state, lane.base_head))
    if planned.config.check_setup and batch_repo.repo.commit_if_present(state.judged_at) is None:
        refs.fetch_commit(state.judged_at)
    return state, planned


def _setup_commit(batch_repo: BatchRepo, state: BatchRunState) -> str:
    """The commit the plan was made from, where `check_setup` runs (issue 59 #4: never the
    lane's base, the batch head, which holds what earlier lanes wrote); refused, before any
    lane code runs, where this clone lacks it."""
    wanted = state.judged_at
    if batch_repo.config.check_setup and batch_repo.repo.commit_if_present(wanted) is None:
        raise UsageError(
            f"the plan's commit {wanted[:12]} is not in this clone, and check_setup runs "
            "there only: run `imm lane --phase fetch` first (it fetches it), or check out "
            "with `fetch-depth: 0`"
        )
    return wanted


def _lane_minutes(args: LaneArgs, configured: int) -> int:
    """In a lane job, short enough for the job's limit to leave imm's room to fire first."""
    return lane_minutes_on_github(configured) if args.actions is not None else configured


def _git_now() -> str:
    return f"{int(time.time())} +0000"
