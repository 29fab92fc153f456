"""The prompt file an executor reads: the task's goal, scope, acceptance, and on a retry the
checks that failed — in the same words a person sees in the lane log and `imm status`."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.model.intent import TaskIntent
from imm_action.model.outcome import Failure
from imm_action.render.failures import code_fence, failure_text


def render_prompt(
    intent: TaskIntent, lane_attempt: int, qa_attempt: int, failures: Sequence[Failure]
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
    if failures:
        lines += [f"## Attempt {qa_attempt}: the previous attempt failed these checks", ""]
        for failure in failures:
            text = failure_text(failure)
            lines += [code_fence(text), text, code_fence(text), ""]
    lines.append(f"(lane attempt {lane_attempt + 1}, QA attempt {qa_attempt})")
    return "\n".join(lines) + "\n"
