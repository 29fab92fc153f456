"""One run per command and tree (issue 61): checks whose descriptors differ only in what does not
change the run — the paths they declare they read, their time limit — are one run on a tree.
The run with the longest limit serves them all; a check with a shorter one that the run
outlasted timed out, as it would have alone. Each gets the verdict under its own id, naming the
check whose run it was (`CheckResult.ran_as`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TypeVar

from imm_action.model.common import sha256_digest
from imm_action.model.descriptor import VerificationDescriptor
from imm_action.model.outcome import CheckResult
from imm_action.verify.check_queue import Queued

C = TypeVar("C", bound=Queued)


def descriptor_run_key(descriptor: VerificationDescriptor) -> str:
    """What a run of `descriptor` depends on: its command (but its time limit), cwd,
    environment, output limit and report — not the paths it declares it reads."""
    dumped = descriptor.model_dump(mode="json")
    dumped.pop("reads", None)
    dumped["command"].pop("timeout_ms", None)
    return sha256_digest(json.dumps(dumped, sort_keys=True))


_KEYS: dict[str, str] = {}  # descriptor digest -> run key: a pass asks for every check's


def run_key(check: Queued) -> str:
    key = _KEYS.get(check.digest)
    if key is None:
        key = _KEYS[check.digest] = descriptor_run_key(check.descriptor)
    return key


def by_run(checks: Iterable[C]) -> dict[str, list[C]]:
    """The checks by run key (one per digest), in the order first met."""
    groups: dict[str, list[C]] = {}
    for check in checks:
        group = groups.setdefault(run_key(check), [])
        if all(other.digest != check.digest for other in group):
            group.append(check)
    return groups


def leader(group: Sequence[C]) -> C:
    """The check whose run serves the group: the one that may run longest."""
    return max(group, key=lambda check: check.descriptor.command.timeout_ms)


def served(result: CheckResult, run_by: Queued, check: Queued) -> CheckResult:
    """`run_by`'s result as `check`'s verdict: its own when it is the same descriptor; else
    named for the run it was, and timed out where the run outlasted `check`'s limit."""
    if check.digest == run_by.digest:
        return result
    update: dict[str, object] = {"check_id": check.check_id, "ran_as": run_by.check_id}
    if not result.timed_out and result.duration_ms > check.descriptor.command.timeout_ms:
        update.update(passed=False, timed_out=True)
    return result.model_copy(update=update)


def serves(run_by: Queued, check: Queued) -> bool:
    """Whether a run of `run_by` may stand for `check`: the same run, given at least as long."""
    return run_key(run_by) == run_key(check) and (
        run_by.descriptor.command.timeout_ms >= check.descriptor.command.timeout_ms
    )
