"""What a pass observed (SPEC §5.2): immutable snapshots that `decide` reads. Observing
decides nothing; these are only what git, the lanes' runners and the verifier said."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from imm_action.git.candidate import BuildResult
from imm_action.lanes.runners import RunnerReport
from imm_action.model.outcome import CheckResult, LaneOutcome
from imm_action.plan.lane_change import ChangedEntry, NamedPath
from imm_action.verify.checks import Check

ChangeIdentity = Mapping[str, str]  # per changed path: "<mode> <blob>" (SPEC §5.4)


@dataclass(frozen=True)
class CommitFact:
    """A commit found on the batch branch after the recorded head."""

    oid: str
    subject: str
    message: str
    parents: tuple[str, ...]
    committer: str = ""  # "Name <email>", as claimed: recorded with an adoption, never shown


@dataclass(frozen=True)
class HeadFacts:
    head: str | None  # where `imm/<slug>` is now (None: it is gone)
    recorded: str  # the newest head the state recorded: base, last integration or adoption
    contains_recorded: bool  # whether `recorded` is an ancestor of (or equal to) `head`
    since_recorded: tuple[CommitFact, ...] = ()  # recorded..head, oldest first
    quarantined: int = 0  # foreign heads of this batch kept aside already (read when moved)


@dataclass(frozen=True)
class LaneFacts:
    outcome: LaneOutcome | None  # the readable outcome at the lane's outcome ref
    lane_commit_parents: tuple[str, ...] | None  # of the outcome's lane commit; None: absent
    runner: RunnerReport
    branch_head: str | None = None  # where the lane branch is (None: not there)


@dataclass(frozen=True)
class PassFacts:
    head: HeadFacts
    lanes: Mapping[str, LaneFacts] = field(default_factory=dict)
    reads: int = 0  # how often this pass has already read the refs afresh


@dataclass(frozen=True)
class StartFacts:
    """What a pass that may start a batch found."""

    branch_head: str | None  # `imm/<slug>` before the batches were read
    base_contains_branch: bool  # nothing on the branch would be lost by resetting it
    all_settled: bool  # completed batches already integrated every enrollable task
    reads: int = 0
    # the finished batch whose work the branch holds as it left it (its id and state), if any
    finished_on_branch: tuple[str, str] | None = None


@dataclass(frozen=True)
class ChecksFound:
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class ChecksMissing:
    """The candidate's own intent files do not give the checks to rerun."""

    task_id: str | None  # whose intent; None: nobody's acceptance applies
    problem: Literal["absent", "unreadable", "none"]
    detail: str = ""


ChecksFact = ChecksFound | ChecksMissing


@dataclass(frozen=True)
class CandidateFacts:
    """One candidate of the speculative chain: built on `built_on`, with its checks and what
    they gave (empty when it was not built or had nothing to run)."""

    task_id: str
    lane_base: str
    lane_commit: str
    built_on: str
    build: BuildResult
    checks: ChecksFact | None = None
    results: tuple[CheckResult, ...] = ()
    change: tuple[ChangedEntry, ...] = ()  # base -> lane commit, re-checked (SPEC §5.4)
    scope: tuple[str, ...] = ()  # the task's scope_hint as planned
    plan_paths: frozenset[str] = frozenset()  # files no lane may change (lane_touches_plan)
    # files the plan's checks run or name -> the tasks whose checks do: only they may change
    # them (lane_touches_check)
    check_files: Mapping[str, NamedPath] = field(default_factory=dict)
    tree_links: Mapping[str, str] | None = None  # every link of the candidate, when they matter
    # the tree `results` come from: the top of the stack it was verified in (SPEC §5.4), or, for
    # a culprit, its own candidate's tree, where its failing checks first failed
    judged_on: str | None = None
    # checks outside the lane's own set that failed first on its candidate (a check landed
    # before its base, which it broke): named in its reason with the ones of its own
    also_checks: tuple[Check, ...] = ()
    # the tests its task's intent retires (`retires_tests`, issue 58): no longer owed
    retired: tuple[str, ...] = ()
