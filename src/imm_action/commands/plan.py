"""`imm plan <slug>`: the batch plan as JSON, Markdown, or the first wave's Actions matrix."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from imm_action.actions.runtime import matrix_entry
from imm_action.carriers.committed import committed_inputs
from imm_action.carriers.intents import plan_cover_warnings
from imm_action.model.common import canonical_model_text
from imm_action.model.config import RepoConfig
from imm_action.model.intent import intent_path
from imm_action.model.plan import MAX_PARALLEL_LIMIT, BatchPlan
from imm_action.passes.gate import gate_markdown
from imm_action.plan.schedule import AdmissionLimits, CandidateChild, startable
from imm_action.ports import Ports
from imm_action.render.plan import plan_markdown
from imm_action.workspace import (
    load_config,
    open_repo,
    plan_initiative,
    scopes_of,
    uncommitted_note,
)

PlanFormat = Literal["json", "markdown", "matrix"]


@dataclass(frozen=True)
class PlanArgs:
    slug: str
    repo: Path
    format: PlanFormat
    max_parallel: int | None
    max_children: int | None = None


def run(args: PlanArgs, ports: Ports) -> int:
    io, initiatives = ports.io, ports.initiatives
    repo = open_repo(args.repo)
    note = uncommitted_note(repo)
    if note is not None:
        io.warn(note)
    loaded = load_config(repo)
    for warning in loaded.warnings:
        io.warn(warning.render())
    config = loaded.config
    if args.max_children is not None:
        config = config.model_copy(update={"max_children": args.max_children})
    plan, intents = plan_initiative(
        repo, args.slug, config, max_parallel=args.max_parallel, initiatives=initiatives
    )
    for file in intents.values():
        for problem in file.problems:
            io.warn(f"warning: {problem.render()} (task excluded as invalid_intent)")
    for task, said in plan_cover_warnings(plan, intents):
        io.warn(f"warning: {intent_path(task)}: {said}")
    if args.format == "json":
        io.out.write(canonical_model_text(plan))
    elif args.format == "markdown":
        io.say(plan_markdown(plan, gate_markdown(args.slug, loaded.config)))
    else:
        base = committed_inputs(repo).commit  # what the plan was read from
        io.say(json.dumps(first_wave_matrix(plan, loaded.config, scopes_of(intents), base)))
    return 0


def first_wave_matrix(
    plan: BatchPlan, config: RepoConfig, scopes: Mapping[str, tuple[str, ...]], base: str
) -> dict[str, list[dict[str, str]]]:
    """The GitHub Actions matrix of the lanes a new batch would start at `base` (≤ 256
    entries), of the plan job's shape."""
    slices = {child.task_id: child.slice_id for child in plan.children}
    settled = {child.task_id for child in plan.children if child.status == "already_settled"}
    after = plan.runs_after()
    candidates = [
        CandidateChild(
            task_id=child.task_id,
            blocked_by=tuple(need for need in child.blocked_by if need not in settled),
            scope_hint=scopes[child.task_id],
            pending=True,
            in_flight=False,
            done=False,
            after=tuple(after.get(child.task_id, ())),
        )
        for child in plan.enrollable
    ]
    limits = AdmissionLimits(
        max_parallel=min(plan.max_parallel, MAX_PARALLEL_LIMIT),
        admissions_left=plan.budget.max_children,
        barrier_globs=tuple(config.barrier_files),
    )
    return {
        "include": [
            matrix_entry(plan.initiative, task_id, slices[task_id], base)
            for task_id in startable(candidates, limits)
        ]
    }
