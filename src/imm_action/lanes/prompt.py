"""The prompt file an executor reads: the task's goal, scope, acceptance, and on a retry the
findings of the checks that failed."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.model.intent import TaskIntent
from imm_action.model.outcome import CheckResult


def render_prompt(
    intent: TaskIntent, lane_attempt: int, qa_attempt: int, findings: Sequence[CheckResult]
) -> str:
    lines = [
        f"# Task {intent.task_id}",
        "",
        intent.goal.strip(),
        "",
        "## Scope",
        "",
        "Change only these paths (anything else refuses the lane):",
        "",
        *(f"- `{entry}`" for entry in intent.scope_hint),
        "",
        "## Acceptance",
        "",
        *(f"- **{item.id}**: {item.assertion}" for item in intent.acceptance),
        "",
    ]
    if findings:
        lines += [f"## Attempt {qa_attempt}: the previous attempt failed these checks", ""]
        for finding in findings:
            why = finding.error or (
                "timed out" if finding.timed_out else
                "output over its limit" if finding.output_limited else
                f"changed files outside its writable paths: {', '.join(finding.changed_outside)}"
                if finding.changed_outside else f"exit code {finding.exit_code}"
            )  # fmt: skip
            lines += [
                f"### {finding.check_id}: {why}",
                "",
                "```",
                finding.output_tail.strip()[-2000:],
                "```",
                "",
            ]
    lines.append(f"(lane attempt {lane_attempt + 1}, QA attempt {qa_attempt})")
    return "\n".join(lines) + "\n"
