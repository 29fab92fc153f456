"""`imm lane --batch-id ID --task TASK`: run one admitted lane and publish its outcome."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from imm_action.batches.repo import open_batch_repo
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK, UsageError
from imm_action.integrate.store import StateStore
from imm_action.lanes.run import LaneSpec, run_lane
from imm_action.masking import masker_for
from imm_action.model.state import ChildState
from imm_action.verify.checks import ResultCache, Verifier


@dataclass(frozen=True)
class LaneArgs:
    batch_id: str
    task_id: str
    repo: Path
    remote: str | None
    executor: str | None
    log: Path | None
    environment: Mapping[str, str]


def run(args: LaneArgs, io: CommandIO, initiatives: InitiativeSource) -> int:
    batch_repo = open_batch_repo(args.repo, args.remote, initiatives)
    batch_repo.refs.refresh()
    stored = StateStore(batch_repo.refs).load(args.batch_id)
    if stored is None:
        raise UsageError(f"no batch {args.batch_id}")
    state = stored.state
    child = next((c for c in state.children if c.task_id == args.task_id), None)
    if child is None:
        raise UsageError(f"batch {args.batch_id} has no task {args.task_id}")
    if child.state is not ChildState.LANE_ADMITTED or child.lane is None:
        raise UsageError(f"task {args.task_id} is {child.state}, not lane_admitted")
    executor = args.executor or batch_repo.config.executor
    if not executor:
        raise UsageError("no executor: pass --executor or set executor in .github/imm.yml")
    spec = LaneSpec(
        slug=state.initiative_slug,
        batch_id=state.batch_id,
        task_id=child.task_id,
        slice_id=child.slice_id,
        base_head=child.lane.base_head,
        attempt=child.attempts,
        qa_failure_limit=state.budget.qa_failure_limit,
        executor=executor,
        lane_setup=batch_repo.config.lane_setup,
        timeout_s=batch_repo.config.lane_timeout_minutes * 60.0,
        executor_env=tuple(batch_repo.config.executor_env),
    )
    verifier = Verifier(
        batch_repo.repo,
        ResultCache(),
        path_env=args.environment.get("PATH", ""),
        mask=masker_for(args.environment),
    )
    log: TextIO = args.log.open("a", encoding="utf-8", buffering=1) if args.log else sys.stdout
    try:
        result = run_lane(
            spec,
            batch_repo.refs,
            verifier,
            environment=args.environment,
            log=log,
            git_date=_git_now,
        )
    finally:
        if args.log:
            log.close()
    outcome = result.outcome
    if outcome.state == "settled":
        io.warn(f"imm lane {args.task_id}: committed {outcome.lane_commit}")
        return EXIT_OK
    io.warn(f"imm lane {args.task_id}: needs a person: {outcome.reason}")
    return EXIT_NEEDS_HUMAN


def _git_now() -> str:
    return f"{int(time.time())} +0000"
