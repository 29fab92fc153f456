"""The plan for a person (pure): its tasks as a Markdown table and its DAG in Mermaid."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imm_action.model.plan import BatchPlan
from imm_action.render.inert import inert_cell
from imm_action.text import plural

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
    *,
    notes: Mapping[str, str] | None = None,
) -> str:
    """`notes`: a second line under a task's name (what its agents cost)."""
    node = {task: f"t{index}" for index, task in enumerate(order)}
    label = {task: f"{task}<br/>{notes[task]}" if notes and task in notes else task
             for task in order}  # fmt: skip
    lines = ["flowchart TD"]
    grouped: set[str] = set()
    for number, group in enumerate(groups, start=1):
        lines.append(f'  subgraph g{number}["parallel group {number}"]')
        lines.extend(f'    {node[task]}["{label[task]}"]' for task in group)
        lines.append("  end")
        grouped.update(group)
    lines.extend(f'  {node[task]}["{label[task]}"]' for task in order if task not in grouped)
    for task, needs in direct_dependencies(closures).items():
        lines.extend(f"  {node[need]} --> {node[task]}" for need in needs)
    used = sorted({status[task] for task in order})
    lines.extend(f"  classDef {name} {styles[name]}" for name in used if name in styles)
    for name in used:
        members = ",".join(node[task] for task in order if status[task] == name)
        lines.append(f"  class {members} {name}")
    return "\n".join(lines)


def plan_markdown(plan: BatchPlan, gate: Sequence[str] = ()) -> str:
    """The plan for a person; `gate`: what gates every move (`passes.gate.gate_markdown`)."""
    closures = {child.task_id: child.blocked_by for child in plan.children}
    status = {child.task_id: child.status for child in plan.children}
    group_of = {
        task: str(number)
        for number, group in enumerate(plan.parallel_groups, start=1)
        for task in group
    }
    rows = [
        f"| `{child.task_id}` | `{child.slice_id}` | {child.status} | {cell(child.reason)} "
        f"| {group_of.get(child.task_id, '—')} | {cell(', '.join(child.blocked_by))} |"
        for child in plan.children
    ]
    parts = [
        f"# Plan for `{plan.initiative}`",
        "",
        f"{len(plan.enrollable)} of {plural(len(plan.children), 'task')} enrollable · "
        f"{plural(len(plan.parallel_groups), 'parallel group')} · "
        f"max_parallel {plan.max_parallel} · "
        f"budget {plural(plan.budget.max_children, 'child', 'children')}, "
        f"{plural(plan.budget.qa_failure_limit, 'QA failure')} · digest `{plan.plan_digest}`",
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
    if plan.check_orders:
        parts += ["## Orders the checks need", ""]
        parts += [
            f"- `{added.task_id}` runs after `{added.after}`: `{added.after}`'s scope covers "
            f"`{added.path}`, which `{added.task_id}`'s check names (only a task ordered before "
            "the check's own may change it)"
            for added in plan.check_orders
        ]
        parts.append("")
    parts += [
        *gate,
        "## Dependency graph",
        "",
        "```mermaid",
        mermaid_dag(plan.order, closures, status, plan.parallel_groups),
        "```",
        "",
    ]
    return "\n".join(parts)


def cell(text: str | None) -> str:
    """Untrusted text (a title, a reason quoting a lane's path) as a table cell that renders
    as it is (render/inert.py)."""
    return inert_cell(text)
