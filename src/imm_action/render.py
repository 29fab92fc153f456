"""Text renderings of plans for people: Markdown tables and a Mermaid DAG (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imm_action.model.plan import BatchPlan
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState

# Node colours by status; the same palette serves plan and batch views.
STATUS_STYLES: Mapping[str, str] = {
    "enrollable": "fill:#ddf4ff,stroke:#0969da",
    "already_settled": "fill:#dafbe1,stroke:#1a7f37",
    "blocked": "fill:#fff8c5,stroke:#9a6700",
    "needs_human": "fill:#ffebe9,stroke:#cf222e",
}


def direct_dependencies(closures: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The transitive reduction of closure sets: the edges a person wants to see."""
    direct: dict[str, list[str]] = {}
    for task, closure in closures.items():
        implied: set[str] = set()
        for need in closure:
            implied.update(closures.get(need, ()))
        direct[task] = [need for need in closure if need not in implied]
    return direct


def mermaid_dag(
    order: Sequence[str],
    closures: Mapping[str, Sequence[str]],
    status: Mapping[str, str],
    groups: Sequence[Sequence[str]],
    styles: Mapping[str, str] = STATUS_STYLES,
) -> str:
    node = {task: f"t{index}" for index, task in enumerate(order)}
    lines = ["flowchart TD"]
    grouped: set[str] = set()
    for number, group in enumerate(groups, start=1):
        lines.append(f'  subgraph g{number}["parallel group {number}"]')
        lines.extend(f'    {node[task]}["{task}"]' for task in group)
        lines.append("  end")
        grouped.update(group)
    lines.extend(f'  {node[task]}["{task}"]' for task in order if task not in grouped)
    for task, needs in direct_dependencies(closures).items():
        lines.extend(f"  {node[need]} --> {node[task]}" for need in needs)
    used = sorted({status[task] for task in order})
    lines.extend(f"  classDef {name} {styles[name]}" for name in used if name in styles)
    for name in used:
        members = ",".join(node[task] for task in order if status[task] == name)
        lines.append(f"  class {members} {name}")
    return "\n".join(lines)


def plan_markdown(plan: BatchPlan) -> str:
    closures = {child.task_id: child.blocked_by for child in plan.children}
    status = {child.task_id: child.status for child in plan.children}
    group_of = {
        task: str(number)
        for number, group in enumerate(plan.parallel_groups, start=1)
        for task in group
    }
    rows = [
        f"| `{child.task_id}` | `{child.slice_id}` | {child.status} | {_cell(child.reason)} "
        f"| {group_of.get(child.task_id, '—')} | {_cell(', '.join(child.blocked_by))} |"
        for child in plan.children
    ]
    parts = [
        f"# Plan for `{plan.initiative}`",
        "",
        f"{len(plan.enrollable)} of {len(plan.children)} tasks enrollable · "
        f"{len(plan.parallel_groups)} parallel groups · max_parallel {plan.max_parallel} · "
        f"budget {plan.budget.max_children} children, {plan.budget.qa_failure_limit} QA failures "
        f"· digest `{plan.plan_digest}`",
        "",
        "| task | slice | status | reason | group | blocked by |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if plan.scope_conflicts:
        parts += ["## Scope conflicts", "", "| task | waits for overlapping |", "|---|---|"]
        parts += [
            f"| `{conflict.task_id}` | {', '.join(f'`{t}`' for t in conflict.overlaps_with)} |"
            for conflict in plan.scope_conflicts
        ]
        parts.append("")
    parts += [
        "## Dependency graph",
        "",
        "```mermaid",
        mermaid_dag(plan.order, closures, status, plan.parallel_groups),
        "```",
        "",
    ]
    return "\n".join(parts)


def _cell(text: str | None) -> str:
    if not text:
        return "—"
    return text.replace("|", "\\|").replace("\n", " ")


BATCH_STYLES: Mapping[str, str] = {
    "pending": "fill:#f6f8fa,stroke:#8c959f",
    "lane_admitted": "fill:#ddf4ff,stroke:#0969da",
    "settled": "fill:#ddf4ff,stroke:#0969da",
    "lane_committed": "fill:#fbefff,stroke:#8250df",
    "integrated": "fill:#dafbe1,stroke:#1a7f37",
    "released": "fill:#dafbe1,stroke:#1a7f37",
    "needs_human": "fill:#ffebe9,stroke:#cf222e",
    "skipped_blocked": "fill:#fff8c5,stroke:#9a6700",
}


def batch_markdown(report: BatchRunReport, state: BatchRunState) -> str:
    rows = [
        f"| `{child.task_id}` | {child.state} | {_cell(child.lane_branch)} | {_cell(child.reason)} "
        f"| {f'`{child.commit[:12]}`' if child.commit else '—'} |"
        for child in report.children
    ]
    return "\n".join(
        [f"# Batch `{report.batch_id}`: {report.batch_state}", *batch_body(report, state, rows)]
    )


def batch_body(report: BatchRunReport, state: BatchRunState, rows: list[str]) -> list[str]:
    """Why, next, the task table and the state-coloured DAG: shared by every batch view."""
    closures = {child.task_id: child.blocked_by for child in state.children}
    status = {child.task_id: str(child.state) for child in state.children}
    order = [child.task_id for child in state.children]
    return [
        "",
        f"**Why:** {report.reason}",
        "",
        f"**Next:** {report.next_action}",
        "",
        "| task | state | lane | reason | commit |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "```mermaid",
        mermaid_dag(order, closures, status, [], BATCH_STYLES),
        "```",
        "",
    ]
