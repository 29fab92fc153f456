"""Batch run state `imm_action/batch_run_state/v1` (SPEC §4.6) and its invariants."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from imm_action.model.common import GitOid, Identifier, StrictModel, Timestamp
from imm_action.model.initiative import Carrier
from imm_action.model.ledger import MAX_TEST_ID
from imm_action.model.outcome import Failure
from imm_action.model.plan import MAX_PARALLEL_LIMIT
from imm_action.model.shard import VerifyRound
from imm_action.model.spend import AgentSpend, Usd

STATE_CONTRACT: Final = "imm_action/batch_run_state/v1"


class BatchState(StrEnum):
    PREPARED = "prepared"
    RUNNING = "running"
    NEEDS_HUMAN = "needs_human"
    COMPLETED = "completed"
    BUDGET_STOPPED = "budget_stopped"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_BATCH_STATES


TERMINAL_BATCH_STATES = frozenset(
    {
        BatchState.COMPLETED,
        BatchState.BUDGET_STOPPED,
        BatchState.FAILED,
        BatchState.REJECTED,
        BatchState.CANCELLED,
    }
)
# A batch in one of these must not leave a lane running behind it.
_NO_FLIGHT_BATCH_STATES = TERMINAL_BATCH_STATES - {BatchState.COMPLETED}


# rounds of earlier runs kept beside the newest (ADR 0075): more runs than this overlapping
# means something keeps dispatching; the oldest is then left to the next stack job
MAX_EARLIER_ROUNDS = 8


class ChildState(StrEnum):
    PENDING = "pending"
    LANE_ADMITTED = "lane_admitted"
    SETTLED = "settled"
    LANE_COMMITTED = "lane_committed"
    INTEGRATED = "integrated"
    RELEASED = "released"
    NEEDS_HUMAN = "needs_human"
    SKIPPED_BLOCKED = "skipped_blocked"

    @property
    def in_flight(self) -> bool:
        return self in IN_FLIGHT_STATES

    @property
    def done(self) -> bool:
        return self in DONE_STATES


IN_FLIGHT_STATES = frozenset(
    {ChildState.LANE_ADMITTED, ChildState.SETTLED, ChildState.LANE_COMMITTED}
)
DONE_STATES = frozenset({ChildState.INTEGRATED, ChildState.RELEASED})
LANE_BOUND_STATES = IN_FLIGHT_STATES | DONE_STATES
REASONED_STATES = frozenset({ChildState.NEEDS_HUMAN, ChildState.SKIPPED_BLOCKED})


class GithubRunner(StrictModel):
    """A lane attempt on GitHub Actions: one matrix job of workflow run `run_id`. `job` is the
    job's name once it is found (before: the task id the name will carry); `job_id` and
    `job_url` are recorded when a pass finds the job among the run's jobs."""

    kind: Literal["github"] = "github"
    run_id: Annotated[int, Field(ge=1)]
    run_attempt: Annotated[int, Field(ge=1)]
    job: str
    job_id: Annotated[int, Field(ge=1)] | None = None
    job_url: str | None = None


class LocalRunner(StrictModel):
    kind: Literal["local"] = "local"
    path: str
    pid: int | None


Runner = Annotated[GithubRunner | LocalRunner, Field(discriminator="kind")]


class Lane(StrictModel):
    branch: str
    base_head: GitOid
    lane_commit: GitOid | None
    runner: Runner
    # The tasks whose lane commits `base_head` holds on top of the batch head, not yet landed
    # when it started (a speculative lane, issue 61): it lands only after them, and is set back
    # when one of them is parked. None: its base is a head of the batch branch.
    speculative_on: list[Identifier] | None = None


class BatchChild(StrictModel):
    task_id: Identifier
    slice_id: Identifier
    blocked_by: list[Identifier]
    state: ChildState
    reason: str | None
    commit: GitOid | None
    lane: Lane | None
    qa_failures: Annotated[int, Field(ge=0)]
    attempts: Annotated[int, Field(ge=0)]
    failures: list[Failure] = Field(default_factory=list)  # the failed commands behind `reason`
    # What the task's agent runs cost in this batch, every attempt summed — parked and lost
    # ones too (issue 45). None: no lane of it ended yet.
    spend: AgentSpend | None = None
    # The tasks it runs after (the plan's `check_orders`, issue 58): their scope covers a path
    # its check names. An order, not a dependency: it starts once each of them has ended,
    # landed or parked. None: none.
    after: list[Identifier] | None = None
    # The tests its intent retired, once it landed (issue 58): listed by every report.
    retired_tests: Annotated[list[Annotated[str, Field(max_length=MAX_TEST_ID)]],
                             Field(max_length=200)] | None = None  # fmt: skip
    # Parked: the failing tests, when every one lies outside its scope (issue 62 #3) — its
    # lane may not change them, so a retry as it is cannot pass them. None: not known so.
    failing_outside_scope: Annotated[list[Annotated[str, Field(max_length=MAX_TEST_ID)]],
                                     Field(max_length=200)] | None = None  # fmt: skip

    @classmethod
    def pending(
        cls, task_id: str, slice_id: str, blocked_by: list[str], after: list[str] | None = None
    ) -> BatchChild:
        """A child enrolled in a batch, before anything happened to it."""
        return cls(
            task_id=task_id,
            slice_id=slice_id,
            blocked_by=blocked_by,
            state=ChildState.PENDING,
            reason=None,
            commit=None,
            lane=None,
            qa_failures=0,
            attempts=0,
            after=after or None,
        )


class StateBudget(StrictModel):
    max_children: Annotated[int, Field(ge=1)]
    qa_failure_limit: Annotated[int, Field(ge=1)]
    # No lane starts once the agents' known spend reaches this (issue 45); None: no limit.
    max_cost_usd: Usd | None = None


class AdoptedHead(StrictModel):
    """A commit someone else pushed on top of the batch branch, adopted as the new expected head."""

    from_: GitOid = Field(alias="from")
    to: GitOid
    by: str | None = None  # the committer of `to` ("Name <email>"): who pushed it, for the report


class QuarantinedHead(StrictModel):
    """A head someone else moved the batch branch to that the batch refused (SPEC §5.2 step 2):
    kept at `ref`, the branch put back to `restored`, its last verified head (issue 42 #4)."""

    ref: str
    foreign: GitOid
    restored: GitOid
    reason: str


class Continuation(StrictModel):
    """Where a continuation batch came from (SPEC §5.7): the stopped batch it continues on the
    same branch, the tasks that batch had integrated (kept, commits unchanged), the tasks whose
    intents changed since it started, and the base-branch commit merged in first, if any."""

    batch_id: Identifier
    kept: list[Identifier]
    changed: list[Identifier]
    merged_base: GitOid | None


class SettledTask(StrictModel):
    """A task of the plan an earlier, completed batch integrated, whose commit is on the line
    this batch builds on (its base, or the batch branch it continues): not a child, never run
    again (issue 41: work only an archived branch holds is not settled)."""

    task_id: Identifier
    batch_id: Identifier
    commit: GitOid


class BranchVerdict(StrictModel):
    """A branch check's last verdict on the batch head: passed, failed, or None (not run on
    it yet: its lanes are being verified, or it was never asked)."""

    check_id: Annotated[str, Field(min_length=1, max_length=200)]
    passed: bool | None
    head: GitOid
    # When it failed there: the command, how it ended and its last lines, shown as a task's
    # failed check is (a red base's output rarely ends with what failed). None otherwise.
    failure: Failure | None = None


MAX_FLAKY_KEPT = 200  # flaky tests a state names (the first seen are kept)
FLAKY_BATCHES = 20  # the newest batches of a repository whose flips a new batch starts knowing
# per test id (a check's, where it reports no tests), how many times it flipped
FlakyCounts = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=MAX_TEST_ID)], Annotated[int, Field(ge=1)]],
    Field(max_length=MAX_FLAKY_KEPT),
]
UNCONFINED_MAX = 500  # characters of one cause of running lane code unconfined
UNCONFINED_CAUSES = 8  # causes kept


class BatchRunState(StrictModel):
    contract: Literal["imm_action/batch_run_state/v1"]
    batch_id: Identifier
    initiative_slug: Identifier
    carrier: Carrier
    plan_digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
    base_ref: str
    base_head: GitOid
    branch: str
    authorized_by: str
    confirmation_time: Timestamp
    budget: StateBudget
    max_parallel: Annotated[int, Field(ge=1, le=MAX_PARALLEL_LIMIT)]
    batch_state: BatchState
    children: Annotated[list[BatchChild], Field(min_length=1)]
    commits: list[GitOid]
    adopted_heads: list[AdoptedHead]
    created_at: Timestamp
    updated_at: Timestamp
    continues: Continuation | None = None
    # Why a batch stopped when no child carries it (a lineage failure with no lane in flight):
    # the report's reason, which would otherwise be lost with the pass that decided it.
    stop_reason: str | None = None
    # The commit the batch's plan was read from: what every task is judged by (its intents'
    # descriptors) is read there, never from a lane's or a candidate's tree (SPEC §5.4).
    # None in states written before it existed: their base_head.
    plan_commit: GitOid | None = None
    # How many distinct checks — of every task the branch holds — passed on its head when it
    # last moved (SPEC §5.4): what `completed` reports as verified. None before anything landed.
    head_checks: Annotated[int, Field(ge=0)] | None = None
    # Of those, how many were carried over by their declared `reads` rather than run on the
    # head (issue 42 #5: the report counted them as passed on it). None in older states.
    head_checks_carried: Annotated[int, Field(ge=0)] | None = None
    # The round's checks fanned out to verify jobs (issue 32, decision 0054), until the job
    # that moves the branch has taken their verdicts. None: verified on the integrating runner.
    verifying: VerifyRound | None = None
    # Rounds of earlier workflow runs whose verify jobs were still at work when a later run's
    # stack job fanned out its own stack (pipelined rounds, issue 61, ADR 0075): each is taken
    # by its own run's integrate job. Oldest first; `verifying` is the newest round.
    verifying_earlier: Annotated[list[VerifyRound], Field(max_length=MAX_EARLIER_ROUNDS)] = Field(
        default_factory=list
    )
    # The plan's tasks that earlier batches settled (issue 41): with the children and the
    # plan's excluded tasks, every task of the plan is accounted for. Empty in older states.
    settled_before: list[SettledTask] = Field(default_factory=list)
    # Foreign heads refused and kept aside while the batch went on (issue 42 #4).
    quarantined: list[QuarantinedHead] = Field(default_factory=list)
    # What gated the batch's moves besides the branch checks (issue 44): `all`, or `branch`
    # (the moving lanes' own checks only); None in a batch with neither branch checks nor
    # `held_checks: branch`, and in older states.
    held_checks: Literal["all", "branch"] | None = None
    # Each branch check's last verdict on the batch head (issue 44): what the status comment,
    # the check run and the job summary show. Empty without branch checks.
    branch_verdicts: Annotated[list[BranchVerdict], Field(max_length=32)] = Field(
        default_factory=list
    )
    # Why lane code of this batch ran unconfined, once per cause (issue 43 #6): a pass whose
    # checks, or a lane whose executor, had no sandbox. Empty: every command was sandboxed.
    unconfined: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=UNCONFINED_MAX)]],
        Field(max_length=UNCONFINED_CAUSES),
    ] = Field(default_factory=list)

    # Tests seen to flip in this batch (issue 61): each id (a check's, where it reports no
    # tests) with how many times it failed on a tree and then passed there, or failed and is
    # listed in the config's `flaky_tests`. Their failures are confirmed, never blamed on one run.
    flaky_tests: FlakyCounts = Field(default_factory=dict)

    # Tests the repository's earlier batches saw flip (issue 61): the flips the newest
    # FLAKY_BATCHES batch states recorded when this one started, summed per test. Known flaky
    # here from the start: their failures are confirmed as `flaky_tests`' are.
    flaky_before: FlakyCounts = Field(default_factory=dict)

    # What the batches this one continues spent on agents, summed along the line (issue 45):
    # counted against `budget.max_cost_usd` with this batch's own spend. None: nothing before.
    spent_before: AgentSpend | None = None

    @property
    def verify_rounds(self) -> list[VerifyRound]:
        """Every round fanned out to verify jobs and not yet taken, oldest first."""
        return [*self.verifying_earlier, *([self.verifying] if self.verifying else [])]

    def round_of(self, run_id: int) -> VerifyRound | None:
        """The round workflow run `run_id` fanned out, while its verdicts are not taken."""
        return next((r for r in self.verify_rounds if r.run_id == run_id), None)

    @property
    def judged_at(self) -> str:
        """Where this batch's intents are read: the plan's commit."""
        return self.plan_commit or self.base_head

    @model_validator(mode="after")
    def _invariants_hold(self) -> BatchRunState:
        problems = state_invariant_violations(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def state_invariant_violations(state: BatchRunState) -> list[str]:
    """Every §4.6 invariant the state breaks, each naming the batch and the child."""
    where = f"batch run state {state.batch_id}"
    problems: list[str] = []
    seen: set[str] = set()
    commits = set(state.commits)
    if len(commits) != len(state.commits):
        problems.append(f"{where} lists a commit twice")
    for child in state.children:
        if child.task_id in seen:
            problems.append(f"{where} has a duplicate child {child.task_id}")
        seen.add(child.task_id)
        problems.extend(
            f"{where} child {child.task_id} {text}" for text in _child_violations(child)
        )
        if child.commit is not None and child.commit not in commits:
            problems.append(f"{where} child {child.task_id} commit is missing from commits")
    if state.batch_state in _NO_FLIGHT_BATCH_STATES and any(
        child.state.in_flight for child in state.children
    ):
        problems.append(f"{where} is {state.batch_state} but a child is still in flight")
    if state.batch_state is BatchState.COMPLETED and not all(
        child.state.done for child in state.children
    ):
        problems.append(f"{where} is completed but a child is not integrated")
    for settled in state.settled_before:
        if settled.task_id in seen:
            problems.append(
                f"{where} task {settled.task_id} is both a child and settled by {settled.batch_id}"
            )
        seen.add(settled.task_id)
        if settled.commit in commits:
            problems.append(
                f"{where} task {settled.task_id} is settled by {settled.batch_id} with a "
                "commit of this batch"
            )
    return problems


def _child_violations(child: BatchChild) -> list[str]:
    problems: list[str] = []
    lane_bound = child.state in LANE_BOUND_STATES
    if lane_bound and child.lane is None:
        problems.append(f"is {child.state} without a lane")
    if child.state in (ChildState.PENDING, ChildState.SKIPPED_BLOCKED) and child.lane is not None:
        problems.append(f"is {child.state} but holds a lane")
    if child.state.done and child.commit is None:
        problems.append(f"is {child.state} without a commit")
    if not child.state.done and child.commit is not None:
        problems.append("has a commit but is not integrated")
    needs_lane_commit = child.state.done or child.state is ChildState.LANE_COMMITTED
    if needs_lane_commit and child.lane is not None and child.lane.lane_commit is None:
        problems.append(f"is {child.state} without a lane commit")
    if child.state in REASONED_STATES and not child.reason:
        problems.append(f"is {child.state} without a reason")
    return problems


MAX_FLAKY_SHOWN = 10


def flaky_said(state: BatchRunState) -> list[tuple[str, str]]:
    """The tests seen to flip in the batch (issue 61), the most flips first, each with what is
    said of it — and how often the repository's batches before it saw it flip — then those
    only the batches before saw flip (known flaky for the repository); past MAX_FLAKY_SHOWN,
    one entry counts the rest."""
    ranked = sorted(state.flaky_tests.items(), key=lambda item: (-item[1], item[0]))
    only_before = [item for item in state.flaky_before.items() if item[0] not in state.flaky_tests]
    before = sorted(only_before, key=lambda item: (-item[1], item[0]))
    said = [
        (test, f"flipped {_times(count)} in this batch{_before(state, test)}; no lane was "
               "blamed for it")
        for test, count in ranked
    ] + [
        (test, f"did not flip in this batch; flipped {_times(count)} in this repository's "
               "batches before it, so its failures are confirmed before any lane is blamed")
        for test, count in before
    ]  # fmt: skip
    shown = said[:MAX_FLAKY_SHOWN]
    if len(said) > MAX_FLAKY_SHOWN:
        shown.append((f"… and {len(said) - MAX_FLAKY_SHOWN} more", "seen to flip"))
    return shown


def _times(count: int) -> str:
    return f"{count} time{'' if count == 1 else 's'}"


def _before(state: BatchRunState, test: str) -> str:
    count = state.flaky_before.get(test)
    return f" ({_times(count)} in this repository's batches before it)" if count else ""


def known_flaky(state: BatchRunState) -> frozenset[str]:
    """The tests a judgement of the batch knows to flip: in it, or in the batches before it."""
    return frozenset(state.flaky_tests) | frozenset(state.flaky_before)


def flaky_in_repository(states: Sequence[BatchRunState]) -> dict[str, int]:
    """The flips the newest FLAKY_BATCHES of `states` recorded, summed per test (issue 61: a
    test seen to flip is known for the repository), the MAX_FLAKY_KEPT most flipped kept."""
    newest = sorted(states, key=lambda state: (state.created_at, state.batch_id))
    summed: dict[str, int] = {}
    for state in newest[-FLAKY_BATCHES:]:
        for test, count in state.flaky_tests.items():
            summed[test] = summed.get(test, 0) + count
    ranked = sorted(summed.items(), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:MAX_FLAKY_KEPT])
