"""What a lane publishes when it ends (`refs/imm/lanes/<batch>/<task>`), and check results."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError

from imm_action.model.common import Digest, GitOid, Identifier, StrictModel
from imm_action.model.ledger import NamedTests, TestLedger
from imm_action.model.network import BlockedAddress
from imm_action.model.spend import MAX_AGENT_RUNS, AgentRun
from imm_action.text import bounded, clean_text

OUTCOME_CONTRACT: Final = "imm_action/lane_outcome/v1"
OUTCOME_FILE: Final = "outcome.json"  # the one file in an outcome commit's tree
# Every lane commit's message ends with this trailer naming its batch (SPEC §5.1 step 5).
BATCH_TRAILER: Final = "Immune-Brain-Batch"
OUTPUT_TAIL_BYTES = 4096
FAILURE_TAIL_LINES = 40  # what a person sees of a failed command's output (SPEC §5.7)
FAILURE_TAIL_BYTES = 16384  # ...and at most this much of it
# A lane's outcome, a forged one included, never carries more than this (issue 21): its text
# fields are bounded and cleaned here, so neither the batch state nor a comment grows with what
# a lane printed.
OUTCOME_MAX_BYTES = 256 * 1024
TEXT_MAX = 8192  # a reason, a command line, an error


ShortText = Annotated[str, Field(max_length=TEXT_MAX), AfterValidator(clean_text)]
MAX_CHANGED_PATHS = 100


def _cut_paths(value: object) -> object:
    """A list of paths cut to MAX_CHANGED_PATHS where it is built (issue 28: a check that
    formats a tree changes 10,000 files, and must get a verdict, not an error)."""
    if isinstance(value, list) and len(value) > MAX_CHANGED_PATHS:
        return bounded([str(item)[:TEXT_MAX] for item in value], MAX_CHANGED_PATHS)
    return value


ChangedPaths = Annotated[
    list[ShortText], BeforeValidator(_cut_paths), Field(max_length=MAX_CHANGED_PATHS)
]
Tail = Annotated[str, Field(max_length=FAILURE_TAIL_BYTES), AfterValidator(clean_text)]


MAX_BLOCKED_HOSTS = 50  # the proxy keeps as many distinct refusals per command
BlockedHosts = Annotated[list[BlockedAddress], Field(max_length=MAX_BLOCKED_HOSTS)]


class CheckResult(StrictModel):
    """One descriptor run: passed iff exit 0, in time, within the output cap, tree unchanged."""

    check_id: Annotated[str, Field(max_length=200)]
    passed: bool
    exit_code: int | None
    duration_ms: Annotated[int, Field(ge=0)]
    timed_out: bool
    output_limited: bool
    changed_outside: ChangedPaths
    output_tail: Tail
    error: ShortText | None = None  # why it could not run at all (missing tool, bad cwd)
    # its last pass on another tree, kept: nothing the descriptor declares it reads changed
    carried_over: bool = False
    # The tests the run reported, each with how it ended (issue 58): kept by the integrator
    # with the run (the verified head's is what a candidate is judged against); never in a
    # lane's outcome, whose findings name the failing tests alone.
    tests: TestLedger | None = None
    failed_tests: NamedTests = Field(default_factory=list)  # the ledger's failed and erred
    # Tests that passed on the verified head and do not on this tree (missing, skipped,
    # xfailed, failed), each with how: set by the integrator's judgement, which then fails it.
    lost_tests: NamedTests = Field(default_factory=list)
    # What the network list refused it (issue 60): each `host:port` once, first asked first
    blocked_hosts: BlockedHosts = Field(default_factory=list)
    # Tests (a check's id, where it reports none) that failed on this tree and pass in this
    # run, or failed here and are listed in `flaky_tests` (issue 61): flaky, never a lane's.
    flaky_tests: NamedTests = Field(default_factory=list)
    # The check whose run gave this verdict (issue 61): the same command, cwd and environment
    # on the same tree run once, and every check of them gets the verdict. None: its own run.
    ran_as: Annotated[str, Field(max_length=200)] | None = None
    # The tests this run ran alone, of all the check runs (issue 61, ADR 0073): a rerun of a
    # failure's tests, never a tree's verdict. Empty: the whole check ran.
    ran_only: NamedTests = Field(default_factory=list)


class Failure(StrictModel):
    """A command that failed, as a person needs to see it wherever the reason is shown: what
    ran, how it ended, and the last lines of its output with secret values masked."""

    step: Annotated[str, Field(max_length=200)]  # "executor", "lane_setup", or a check id
    command: ShortText  # the argv, shell-quoted for reading (it never ran through a shell)
    exit_code: int | None
    timeout_s: float | None = None  # set iff the command was killed at its timeout
    error: ShortText | None = None  # why it could not run at all (missing tool, bad cwd)
    output_limited: bool = False
    changed_outside: ChangedPaths = Field(default_factory=list)
    output_tail: Tail  # at most FAILURE_TAIL_LINES lines
    failed_tests: NamedTests = Field(default_factory=list)  # what its test report says failed
    lost_tests: NamedTests = Field(default_factory=list)  # passed on the head, no longer
    blocked_hosts: BlockedHosts = Field(default_factory=list)  # the network list refused


MAX_FINDINGS = 256
MAX_FAILURES = 16


def _cut_failures(value: object) -> object:
    """The first failures and one that says how many more there were."""
    if not isinstance(value, list) or len(value) <= MAX_FAILURES:
        return value
    more = {"step": f"… and {len(value) - MAX_FAILURES + 1} more", "command": "",
            "exit_code": None, "output_tail": ""}  # fmt: skip
    return [*value[: MAX_FAILURES - 1], more]


def _cut_findings(value: object) -> object:
    return value[:MAX_FINDINGS] if isinstance(value, list) else value


class LaneOutcome(StrictModel):
    contract: Literal["imm_action/lane_outcome/v1"]
    batch_id: Identifier
    task_id: Identifier
    attempt: Annotated[int, Field(ge=0)]
    state: Literal["settled", "needs_human"]
    reason: ShortText | None
    qa_failures: Annotated[int, Field(ge=0)]
    findings: Annotated[
        list[CheckResult], BeforeValidator(_cut_findings), Field(max_length=MAX_FINDINGS)
    ]
    lane_commit: GitOid | None
    # needs_human: why, shown as is; settled: what the last failed attempt failed (then fixed)
    failures: Annotated[
        list[Failure], BeforeValidator(_cut_failures), Field(max_length=MAX_FAILURES)
    ] = Field(default_factory=list)
    # settled: how long each of its checks took on its lane's last attempt (check id -> ms):
    # the integrator's estimate of a stack's checks before it ran them (issue 32). Said by
    # the lane, so trusted for nothing else: it only decides whether checks fan out.
    durations_ms: Annotated[
        dict[Annotated[str, Field(max_length=200)], Annotated[int, Field(ge=0)]],
        Field(max_length=MAX_FINDINGS),
    ] = Field(default_factory=dict)
    # Why the lane's executor and checks ran without a sandbox (issue 43 #6); None: sandboxed.
    unconfined: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    # What `lane_network` refused its executor and lane_setup (issue 60), each host:port once
    blocked_hosts: BlockedHosts = Field(default_factory=list)
    # What each executor run of the lane reported of itself, in order (issue 45): said by the
    # lane, so trusted for nothing but the cost it shows and the budget it counts.
    agent_runs: Annotated[list[AgentRun], Field(max_length=MAX_AGENT_RUNS)] = Field(
        default_factory=list
    )


class CachedCheck(StrictModel):
    tree: GitOid
    descriptor_digest: Digest
    result: CheckResult


class CheckCache(StrictModel):
    """Descriptor runs already done in a batch, keyed by (tree, descriptor digest): stored in
    the batch's state commit so no pass, on any runner, runs the same check twice."""

    contract: Literal["imm_action/check_cache/v1"] = "imm_action/check_cache/v1"
    entries: list[CachedCheck] = Field(default_factory=list)


def parse_outcome(text: str) -> LaneOutcome | None:
    """The outcome in an outcome commit's `outcome.json`; None when it is not one (then the
    lane is treated as having published nothing)."""
    if len(text) > OUTCOME_MAX_BYTES:
        return None
    try:
        return LaneOutcome.model_validate_json(text)
    except ValidationError:
        return None


def lane_commit_message(task_id: str, subject: str, batch_id: str) -> str:
    """`imm(<task>): <subject>`, a blank line, and the batch trailer."""
    return f"imm({task_id}): {subject}\n\n{BATCH_TRAILER}: {batch_id}\n"


def carries_trailer(message: str, batch_id: str) -> bool:
    return f"{BATCH_TRAILER}: {batch_id}" in (line.strip() for line in message.splitlines())
