"""What a pass is asked (`PassRequest`), what it works with (`PassPorts`: refs, lane runners,
a verifier, a clock, logs) and what it gives back (`PassResult`)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from imm_action.errors import ImmError
from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, Identity
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.decide import (
    Mutation,
)
from imm_action.integrate.shards import (
    FanOutRules,
)
from imm_action.integrate.stack_record import StackRecord
from imm_action.integrate.store import StoredBatch
from imm_action.lanes.runners import LaneRunners
from imm_action.model.config import CONFIG_PATH
from imm_action.model.plan import BatchPlan
from imm_action.model.state import (
    SettledTask,
)
from imm_action.passes.observe import (
    CandidateMemo,
)
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache

MAX_LOST_RACES = 25


# A lost race is normal operation, not a problem: it goes to the debug log (IMMDEBUG=1).
DEBUG = logging.getLogger("imm_action.passes")


def jittered_pause(lost: int) -> None:
    """The one back-off between lost races: short, growing, and random so that racing passes
    do not collide again in lockstep."""
    time.sleep(random.uniform(0.005, 0.02 * (lost + 1)))


RoundAlive = Callable[[int], bool]


def no_other_run(run_id: int) -> bool:
    """Off GitHub, or where no run can be asked about: no other run is in progress."""
    return False


@dataclass(frozen=True)
class PassRequest:
    slug: str
    plan: BatchPlan
    scopes: Mapping[str, tuple[str, ...]]
    base_ref: str
    base_head: str
    authorized_by: str
    new_batch_id: str  # the id a batch started by this pass gets
    batch_id: str | None = None  # resume exactly this batch
    admit: bool = False
    start: bool = True  # may this pass start a new batch?
    barrier_globs: tuple[str, ...] = ()
    speculative_lanes: bool = True  # the config's (issue 61, ADR 0072)
    # A person's decision applied to the loaded state first (`imm retry`, `imm cancel`).
    mutate: Mutation | None = None
    # What a pass that names no batch does when the latest batch stopped (SPEC §5.7), and
    # for `imm retry <task>` the one task a continuation runs again.
    stopped: Stopped = Stopped.RESUME
    retry: str | None = None
    # False: the pass runs no check. A lane-committed child whose candidate's checks are not
    # in the result cache yet waits as if its lane had not ended (`PassResult.unverified`);
    # `imm run` verifies it in the background and lands it in a later pass, lanes going on.
    verify: bool = True
    # The max_parallel a person asked for (command line, `/imm run --max-parallel`), not the
    # config's: a live batch resumed with another one is refused (`batch_parallel_mismatch`).
    parallel_asked: int | None = None
    committer: Identity = IMM_IDENTITY  # the config's, for a continuation's merge commit
    config_file: str = CONFIG_PATH  # where the config lies: no lane may change it
    # The cost budget of a batch this pass starts or continues (issue 45); None: no limit.
    max_cost_usd: float | None = None
    # What lanes at work spent so far, where the runner sees them (`imm run`): counted against
    # the batch's cost budget before any lane starts.
    in_flight_usd: float = 0.0
    # What earlier batches integrated on the line a new batch builds on (the plan's
    # `already_settled` tasks, with their commits): recorded in the new batch's state.
    settled: tuple[SettledTask, ...] = ()
    # Tasks whose scope covers a path another task's check names and runs after its owner, or
    # beside it (issue 42 #3, issue 58), as (task, warning): said once by `imm run` before any
    # lane starts; a lane of theirs that changes the path is refused.
    scope_conflicts: tuple[tuple[str, str], ...] = ()
    # On GitHub, where a stack's checks may fan out to verify jobs (issue 32, decision 0054):
    # the stack and bisect jobs' pass (it runs no check, and records what the stack owes as
    # shards when that pays), the verdicts the bisect and integrate jobs downloaded, and, for
    # every pass of the workflow, that a stack whose round is recorded is left to its verify
    # jobs rather than verified by this pass.
    fan_out: FanOut | None = None
    verdicts: RoundVerdicts | None = None
    verify_jobs: bool = False
    # Whether another workflow run's integrate job may still come (pipelined rounds, ADR
    # 0075): the round that run fanned out, and the lanes it admitted, are left to it.
    round_alive: RoundAlive = no_other_run


@dataclass(frozen=True)
class FanOut:
    run_id: int
    rules: FanOutRules


@dataclass(frozen=True)
class RoundVerdicts:
    """The verdict files this run's verify jobs uploaded, by artifact name."""

    run_id: int
    files: Mapping[str, bytes]


@dataclass
class PassPorts:
    refs: RefStore
    lanes: LaneRunners
    verifier: Callable[[ResultCache], Verifier]
    clock: Callable[[], str]
    log: Callable[[str], None] = field(default=lambda message: None)
    debug: Callable[[str], None] = DEBUG.debug
    pause: Callable[[int], None] = jittered_pause
    candidates: CandidateMemo | None = None  # candidates built earlier (`imm run` keeps them)
    # why this pass's checks run without a sandbox (the state records it); None: sandboxed
    unconfined: str | None = None


@dataclass(frozen=True)
class PassResult:
    stored: StoredBatch
    admitted: tuple[str, ...]
    integrated: tuple[str, ...]
    races_lost: int
    head: str | None = None  # the batch branch as the pass left it
    unverified: tuple[str, ...] = ()  # lane-committed children waiting for checks (`verify`)
    stacks: tuple[StackRecord, ...] = ()  # each round's stack, as verified (SPEC §5.4)
    base_check_runs: int = 0  # the branch checks run on the base before any lane (issue 61)
    startable: tuple[str, ...] = ()  # children a plan pass would admit now


class GaveUpError(ImmError):
    """Too many lost races in a row: something else keeps moving the refs."""
