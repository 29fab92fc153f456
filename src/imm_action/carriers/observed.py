"""What any carrier observed, with where each piece came from, and the shared normalisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from imm_action.errors import InputError, Problem
from imm_action.model.common import id_problem
from imm_action.model.initiative import Carrier, Initiative, InitiativeTask
from imm_action.plan.dag import CycleError, kahn_order


@dataclass(frozen=True)
class Location:
    path: str
    line: int | None

    def problem(self, message: str) -> Problem:
        return Problem(self.path, self.line, message)


@dataclass(frozen=True)
class ObservedDependency:
    task_id: str
    location: Location


@dataclass(frozen=True)
class ObservedTask:
    task_id: str
    slice_id: str
    blocked_by: tuple[ObservedDependency, ...]
    location: Location


@dataclass(frozen=True)
class LocatedInitiative:
    """A normalised initiative plus where each task was declared, for error messages later."""

    initiative: Initiative
    locations: Mapping[str, Location]

    def cycle_problems(self, error: CycleError) -> list[Problem]:
        return [
            self.locations[task].problem(f"Task {task} is on a dependency cycle: {error}")
            for task in error.tasks
        ]


def normalise(
    slug: str,
    carrier: Carrier,
    observed: Sequence[ObservedTask],
    origin: Location,
) -> LocatedInitiative:
    """SPEC §4.4 normalisation, shared by every carrier; all problems are reported together."""
    problems: list[Problem] = []
    if (why := id_problem(slug)) is not None:
        problems.append(origin.problem(f"initiative slug {slug!r} is not a valid id: {why}"))
    problems.extend(_identity_problems(observed))
    known = {task.task_id for task in observed}
    for task in observed:
        problems.extend(_dependency_problems(task, known))
    if problems:
        raise InputError(problems)
    tasks = tuple(
        InitiativeTask(
            task_id=task.task_id,
            slice_id=task.slice_id,
            blocked_by=[dependency.task_id for dependency in task.blocked_by],
        )
        for task in sorted(observed, key=lambda task: task.task_id)
    )
    located = LocatedInitiative(
        Initiative(slug=slug, carrier=carrier, tasks=tasks),
        {task.task_id: task.location for task in observed},
    )
    try:
        kahn_order({task.task_id: task.blocked_by for task in tasks})
    except CycleError as error:
        raise InputError(located.cycle_problems(error)) from None
    return located


def _identity_problems(observed: Sequence[ObservedTask]) -> list[Problem]:
    problems: list[Problem] = []
    first_task: dict[str, Location] = {}
    first_slice: dict[str, Location] = {}
    for task in observed:
        for kind, value in (("task", task.task_id), ("slice", task.slice_id)):
            if (why := id_problem(value)) is not None:
                problems.append(
                    task.location.problem(f"{kind} id {value!r} is not a valid id: {why}")
                )
        for seen, key, kind in (
            (first_task, task.task_id, "Task"),
            (first_slice, task.slice_id, "Slice"),
        ):
            if key in seen:
                problems.append(
                    task.location.problem(
                        f"{kind} {key} is declared twice (first at {_at(seen[key])})"
                    )
                )
            else:
                seen[key] = task.location
    return problems


def _dependency_problems(task: ObservedTask, known: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for dependency in task.blocked_by:
        where = dependency.location
        if dependency.task_id == task.task_id:
            problems.append(where.problem(f"Task {task.task_id} is blocked by itself"))
        elif dependency.task_id in seen:
            problems.append(
                where.problem(f"Task {task.task_id} lists dependency {dependency.task_id} twice")
            )
        elif dependency.task_id not in known:
            problems.append(
                where.problem(
                    f"Task {task.task_id} is blocked by {dependency.task_id!r}, "
                    "which is not a Task of this initiative"
                )
            )
        seen.add(dependency.task_id)
    return problems


def _at(location: Location) -> str:
    return f"line {location.line}" if location.line is not None else location.path
