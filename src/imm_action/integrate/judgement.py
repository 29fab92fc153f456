"""Pure: what a stack's judgement says of each lane of its chain — the results it passed with,
or a culprit's failing checks under its own ids — which lanes can be verified, and which tasks
the branch holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from imm_action.git.candidate import Candidate
from imm_action.integrate.facts import (
    CandidateFacts,
    ChecksFound,
)
from imm_action.integrate.landing import refusal_of
from imm_action.integrate.stack import (
    StackFailed,
    StackJudgement,
    StackLevel,
    StackPassed,
)
from imm_action.model.outcome import CheckResult
from imm_action.model.state import BatchRunState
from imm_action.verify.checks import Check


def held_tasks(state: BatchRunState) -> list[str]:
    """The integrated tasks, in the order they landed."""
    order = {commit: index for index, commit in enumerate(state.commits)}
    done = [child for child in state.children if child.state.done and child.commit]
    return [child.task_id for child in sorted(done, key=lambda c: order.get(c.commit or "", 0))]


def with_judgement(
    chain: list[CandidateFacts],
    stacked: Sequence[int],
    levels: Sequence[StackLevel],
    judged: StackJudgement,
) -> list[CandidateFacts]:
    """The chain with each stacked lane's results: from the top's tree when the stack passed;
    a culprit's failing checks on its own candidate when it did not (the others have none)."""
    judged_chain = list(chain)
    top_tree = levels[-1].tree if len(levels) > 1 else None
    for level, index in enumerate(stacked, start=1):
        entry = chain[index]
        own = entry.checks.checks if isinstance(entry.checks, ChecksFound) else ()
        match judged:
            case StackPassed(results=results):
                found = tuple(named_result(results[check.digest], check.check_id) for check in own)
                judged_chain[index] = replace(entry, results=found, judged_on=top_tree)
            case StackFailed(culprits=culprits) if level in culprits:
                judged_chain[index] = culprit_facts(entry, own, culprits[level], levels[level].tree)
    return judged_chain


def culprit_facts(
    entry: CandidateFacts,
    own: Sequence[Check],
    failed: Sequence[tuple[Check, CheckResult]],
    tree: str,
) -> CandidateFacts:
    """A culprit's failing results under the ids of its own checks that share their
    descriptor, or under the id of the check it broke when none does."""
    results: list[CheckResult] = []
    also: list[Check] = []
    for check, result in failed:
        mine = [c for c in own if c.digest == check.digest]
        if not mine:
            also.append(check)
        results += [named_result(result, c.check_id) for c in mine or [check]]
    return replace(entry, results=tuple(results), judged_on=tree, also_checks=tuple(also))


def named_result(result: CheckResult, check_id: str) -> CheckResult:
    return (
        result if result.check_id == check_id else result.model_copy(update={"check_id": check_id})
    )


def verifiable(entry: CandidateFacts) -> bool:
    return (
        isinstance(entry.build, Candidate)
        and isinstance(entry.checks, ChecksFound)
        and refusal_of(entry) is None
    )
