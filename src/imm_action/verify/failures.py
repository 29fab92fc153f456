"""A failed check or step as a `Failure`: the command, how it ended, its last lines (masked)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from imm_action.masking import NO_MASK, Masker
from imm_action.model.outcome import FAILURE_TAIL_LINES, CheckResult, Failure
from imm_action.verify.checks import Check


def last_lines(text: str, count: int = FAILURE_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-count:])


def command_text(argv: Sequence[str], cwd: str = ".") -> str:
    """How a command reads to a person; it never ran through a shell."""
    joined = shlex.join(argv)
    return joined if cwd in (".", "") else f"(in {cwd}) {joined}"


def check_failure(check: Check, result: CheckResult, mask: Masker = NO_MASK) -> Failure:
    command = check.descriptor.command
    return Failure(
        step=check.check_id,
        command=mask(command_text([command.executable, *command.argv], command.cwd)),
        exit_code=result.exit_code,
        timeout_s=command.timeout_ms / 1000 if result.timed_out else None,
        error=mask(result.error) if result.error else None,
        output_limited=result.output_limited,
        changed_outside=list(result.changed_outside),
        output_tail=mask(last_lines(result.output_tail)),
        failed_tests=[mask(test) for test in result.failed_tests],
        lost_tests=[mask(test) for test in result.lost_tests],
        blocked_hosts=list(result.blocked_hosts),
    )


def check_failures(
    checks: Sequence[Check], results: Sequence[CheckResult], mask: Masker = NO_MASK
) -> list[Failure]:
    """The failures among results, each with the command of its check (matched by check id)."""
    by_id = {check.check_id: check for check in checks}
    return [
        check_failure(by_id[result.check_id], result, mask)
        for result in results
        if not result.passed and result.check_id in by_id
    ]
