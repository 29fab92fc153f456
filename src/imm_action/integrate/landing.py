"""Pure: step 5 of a pass (SPEC §5.4) — which lane-committed lanes land, in what order, and
which are parked: culprits the bisection found, lanes whose change is refused (out of scope,
touching the plan or another task's check, links out of the tree), and the state after each
step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from imm_action.git.candidate import (
    Candidate,
    ChangeNotCarried,
    LaneBaseNotInHead,
    LaneParentsWrong,
    MergeBaseForeign,
    MergeConflicts,
)
from imm_action.integrate import transitions as t
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFound,
    ChecksMissing,
)
from imm_action.integrate.ledger import failing_outside_scope
from imm_action.integrate.reasons import (
    CHECK_FAILED,
    CONFLICT,
    HEAD_CHECK_FAILED,
    LINEAGE_BROKEN,
)
from imm_action.model.ledger import lost_line
from imm_action.model.outcome import CheckResult, Failure
from imm_action.model.state import (
    BatchChild,
    BatchRunState,
    ChildState,
)
from imm_action.plan.lane_change import lane_change_refusal
from imm_action.text import listed
from imm_action.verify.checks import Check
from imm_action.verify.failures import check_failures

# Git updates the refs of one transaction atomically for writers, but a reader can see some of
# them moved and others not yet. Whatever looks like a foreign branch or a broken lineage is
# therefore read again this many times before it is believed.


@dataclass(frozen=True)
class Park:
    task_id: str
    reason: str
    failures: tuple[Failure, ...] = ()  # the failed commands behind the reason
    # the failing tests, when all lie outside the task's scope: no retry as it is can pass them
    outside_scope: tuple[str, ...] = ()


@dataclass(frozen=True)
class Land:
    """Move the batch branch from `head` to `commit`, recording the integration (and the tests
    its task retired)."""

    task_id: str
    commit: str
    head: str
    retired: tuple[str, ...] = ()


Landing = Park | Land


@dataclass(frozen=True)
class LandingDecision:
    """One round of step 5: what to do, in order, and whether another round may land more."""

    steps: tuple[Landing, ...] = ()
    again: bool = False


# -- step 5: integration ------------------------------------------------------------------------
def ready_to_integrate(state: BatchRunState) -> list[BatchChild]:
    """Lane-committed children, in plan order."""
    return [c for c in state.children if c.state is ChildState.LANE_COMMITTED]


def decide_landings(head: str, chain: Sequence[CandidateFacts]) -> LandingDecision:
    """Land a verified stack (SPEC §5.4): the chain in plan order, each lane at its own
    candidate, when the top's tree passed every check of every lane — or, when checks failed,
    park the culprits the bisection found and the refused lanes below them; the rest is built
    again without them next round. A refused lane is parked and the chain goes on."""
    culprits = [index for index, entry in enumerate(chain) if _failed(entry)]
    if culprits:
        return _park_culprits(chain, culprits)
    steps: list[Landing] = []
    landed: list[CandidateFacts] = []
    for entry in chain:
        refusal = refusal_of(entry)
        if refusal is not None:
            steps.append(Park(entry.task_id, refusal))
            continue
        build = entry.build
        if not isinstance(build, Candidate):
            raise t.TransitionError(f"candidate of {entry.task_id} was neither built nor refused")
        if build.head != head or not _passed_whole(entry):
            break
        landed.append(entry)
        steps.append(Land(entry.task_id, build.commit, head, entry.retired))
        head = build.commit
    kept = _judged_by_the_top(landed)
    if len(kept) < len(landed):
        # refusals above the first lane that does not land were found against its candidate
        cut = steps.index(next(s for s in steps if s.task_id == landed[len(kept)].task_id))
        steps = steps[:cut]
    return LandingDecision(tuple(steps), again=bool(steps))


def landing_moves(landing: LandingDecision) -> bool:
    return any(isinstance(step, Land) for step in landing.steps)


def verified_on_top(chain: Sequence[CandidateFacts], landing: LandingDecision) -> tuple[int, int]:
    """How many distinct checks passed on the tree the branch moves to — the last landed
    lane's, which are those of every task the branch then holds (SPEC §5.4) — and how many of
    them were carried over by their declared `reads` rather than run on that tree."""
    last = [step.task_id for step in landing.steps if isinstance(step, Land)][-1]
    entry = next(entry for entry in chain if entry.task_id == last)
    checks = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
    carried = {
        check.digest
        for check, result in zip(checks, entry.results, strict=False)
        if result.carried_over
    }
    return len({check.digest for check in checks}), len(carried)


def head_failure_reason(branch: str, head: str, failed: Sequence[tuple[Check, CheckResult]]) -> str:
    """Why the batch waits when checks of tasks the branch holds fail on its head itself."""
    ids = [check.check_id for check, _ in failed]
    return (
        f"{HEAD_CHECK_FAILED}: {listed(ids)} failed on every run on {branch} at {head[:12]} "
        "itself, or on a lane's candidate and its parent alike (flaky, or the environment "
        "changed); no lane is blamed"
    )


def _failed(entry: CandidateFacts) -> bool:
    return any(not result.passed for result in entry.results)


def _passed_whole(entry: CandidateFacts) -> bool:
    """Results for every check the lane is judged by, all passed."""
    if not isinstance(entry.checks, ChecksFound) or entry.judged_on is None:
        return False
    passed = {result.check_id for result in entry.results if result.passed}
    return all(check.check_id in passed for check in entry.checks.checks)


def _judged_by_the_top(landed: list[CandidateFacts]) -> list[CandidateFacts]:
    """The landed lanes up to the last whose tree is the one all of them were judged on: the
    batch branch moves only to a tree that passed every check of every lane it adds."""
    if not landed:
        return []
    judged = {entry.judged_on for entry in landed}
    if len(judged) != 1:
        return []
    (tree,) = judged
    last = max(
        (i for i, entry in enumerate(landed) if isinstance(entry.build, Candidate)
         and entry.build.tree == tree),
        default=-1,
    )  # fmt: skip
    return landed[: last + 1]


def _park_culprits(chain: Sequence[CandidateFacts], culprits: list[int]) -> LandingDecision:
    """The culprits, and the lanes refused below the first of them (those above it were
    refused against candidates that are built again)."""
    steps: list[Landing] = []
    for index, entry in enumerate(chain):
        if index in culprits:
            steps.append(_culprit_park(entry))
        elif index < culprits[0] and (refusal := refusal_of(entry)) is not None:
            steps.append(Park(entry.task_id, refusal))
    return LandingDecision(tuple(steps), again=True)


def _culprit_park(entry: CandidateFacts) -> Park:
    failed = [result.check_id for result in entry.results if not result.passed]
    commit = entry.build.commit if isinstance(entry.build, Candidate) else entry.lane_commit
    why = f"{CHECK_FAILED}: {', '.join(failed)} failed on candidate {commit}"
    # what a lane that deleted, skipped or deselected tests did (issue 58): the reason a check
    # that exited 0 failed, said nowhere else
    lost = [f"{r.check_id}: {lost_line(r.lost_tests)}" for r in entry.results
            if r.lost_tests and r.exit_code == 0]  # fmt: skip
    if lost:
        why += f" ({'; '.join(lost)})"
    own = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
    failures = tuple(check_failures((*own, *entry.also_checks), entry.results))
    return Park(entry.task_id, why, failures, failing_outside_scope(failures, entry.scope))


def refusal_of(entry: CandidateFacts) -> str | None:
    """Why this lane commit must not land (SPEC §5.4), or None when its candidate may be
    verified. The checks are only looked at for a built candidate."""
    lane_commit, base, head = entry.lane_commit, entry.lane_base, entry.built_on
    # the lane's own checks prove nothing: its change is checked again (SPEC §5.4)
    refused = lane_change_refusal(
        entry.change, entry.scope, entry.plan_paths, entry.tree_links,
        check_files=entry.check_files, task_id=entry.task_id,
    )  # fmt: skip
    if refused is not None:
        return refused
    match entry.build:
        case LaneParentsWrong(parents=parents) if len(parents) != 1:
            return (
                f"{LINEAGE_BROKEN}: lane commit {lane_commit} has {len(parents)} parents, "
                "expected exactly one"
            )
        case LaneParentsWrong():
            return (
                f"{LINEAGE_BROKEN}: lane commit {lane_commit} does not descend from lane base "
                f"{base}"
            )
        case LaneBaseNotInHead():
            return f"{LINEAGE_BROKEN}: lane base {base} is not an ancestor of batch head {head}"
        case MergeBaseForeign(bases=bases):
            return (
                f"{LINEAGE_BROKEN}: merge base of {head} and {lane_commit} is "
                f"{', '.join(bases) or 'none'}, not the lane base {base}"
            )
        case MergeConflicts(paths=paths):
            return (
                f"{CONFLICT}: lane commit {lane_commit} conflicts with batch head {head} in: "
                + listed(paths)
            )
        case ChangeNotCarried(commit=commit):
            return (
                f"{CONFLICT}: candidate {commit} does not carry exactly the change of lane "
                f"commit {lane_commit}"
            )
        case Candidate(commit=candidate):
            return _checks_refusal(entry, candidate)
        case unreachable:
            assert_never(unreachable)


def _checks_refusal(entry: CandidateFacts, candidate: str) -> str | None:
    match entry.checks:
        case ChecksFound(checks=checks) if checks:
            return None
        case ChecksFound() | None:
            return f"{CHECK_FAILED}: no descriptor to rerun on candidate {candidate}"
        case ChecksMissing(problem="none"):
            return f"{CHECK_FAILED}: no descriptor to rerun on candidate {candidate}"
        case ChecksMissing(task_id=task_id, problem="absent"):
            return f"{CHECK_FAILED}: intent of {task_id} is absent from candidate {candidate}"
        case ChecksMissing(task_id=task_id, detail=detail):
            return (
                f"{CHECK_FAILED}: intent of {task_id} is unreadable in candidate {candidate}: "
                f"{detail}"
            )
        case unreachable:
            assert_never(unreachable)


def apply_landing(state: BatchRunState, step: Landing) -> BatchRunState:
    """The state after one landing step."""
    match step:
        case Park(task_id=task_id, reason=reason, failures=failures, outside_scope=outside):
            return t.park(state, task_id, reason, failures=failures, outside_scope=outside)
        case Land(task_id=task_id, commit=commit, retired=retired):
            return t.integrated(state, task_id, commit, retired)
        case unreachable:
            assert_never(unreachable)
