"""Which descriptors a candidate must pass (SPEC §5.4): the child's acceptance plus that of every
sibling integrated since the lane base, read from the candidate's own intent files."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from imm_action.git.candidate import CHECK_FAILED, IntegrationRefused
from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.intent import TaskIntent, intent_path
from imm_action.verify.checks import Check


def candidate_checks(
    repo: GitRepo,
    *,
    candidate: str,
    task_id: str,
    lane_base: str,
    head: str,
    task_of_commit: Mapping[str, str],
) -> tuple[Check, ...]:
    since = [
        task_of_commit[c] for c in repo.commits_between(lane_base, head) if c in task_of_commit
    ]
    checks: list[Check] = []
    for owner in [task_id, *since]:
        checks.extend(_acceptance_of(repo, candidate, owner))
    if not checks:
        raise IntegrationRefused(CHECK_FAILED, f"no descriptor to rerun on candidate {candidate}")
    return tuple(checks)


def _acceptance_of(repo: GitRepo, candidate: str, task_id: str) -> list[Check]:
    text = repo.read_file(candidate, intent_path(task_id))
    if text is None:
        raise IntegrationRefused(
            CHECK_FAILED, f"intent of {task_id} is absent from candidate {candidate}"
        )
    try:
        intent = TaskIntent.model_validate_json(text)
        return [
            Check(f"{task_id}:{item.id}", parse_descriptor(item.verification))
            for item in intent.acceptance
        ]
    except (ValidationError, ValueError) as error:
        raise IntegrationRefused(
            CHECK_FAILED, f"intent of {task_id} is unreadable in candidate {candidate}: {error}"
        ) from None
