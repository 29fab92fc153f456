"""Dependency order and closures of a task graph (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class CycleError(ValueError):
    """Dependencies that can never all be satisfied; `tasks` is one cycle, in dependency order."""

    def __init__(self, tasks: Sequence[str]) -> None:
        self.tasks = tuple(tasks)
        super().__init__(
            "task dependencies form a cycle: " + " -> ".join([*self.tasks, self.tasks[0]])
        )


def kahn_order(dependencies: Mapping[str, Sequence[str]]) -> list[str]:
    """Kahn layers, each sorted by task id, concatenated. Every dependency must be a known task."""
    dependents: dict[str, list[str]] = {task: [] for task in dependencies}
    waiting = {}
    for task, needs in dependencies.items():
        unique = set(needs)
        waiting[task] = len(unique)
        for need in unique:
            dependents[need].append(task)
    layer = sorted(task for task, count in waiting.items() if count == 0)
    order: list[str] = []
    while layer:
        order.extend(layer)
        following: list[str] = []
        for task in layer:
            for dependent in dependents[task]:
                waiting[dependent] -= 1
                if waiting[dependent] == 0:
                    following.append(dependent)
        layer = sorted(following)
    if len(order) != len(dependencies):
        raise CycleError(_find_cycle(dependencies, set(order)))
    return order


def _find_cycle(dependencies: Mapping[str, Sequence[str]], ordered: set[str]) -> list[str]:
    # Every unordered task waits on another unordered task, so walking "waits on" links from
    # any of them must revisit a task; the walk from its first visit is the cycle.
    start = min(task for task in dependencies if task not in ordered)
    path: list[str] = []
    seen: dict[str, int] = {}
    task = start
    while task not in seen:
        seen[task] = len(path)
        path.append(task)
        task = min(need for need in dependencies[task] if need not in ordered)
    cycle = path[seen[task] :]
    cycle.reverse()  # dependency first: a -> b reads "b depends on a"
    return cycle


def transitive_closures(
    order: Sequence[str], dependencies: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Each task's full set of (transitive) dependencies, sorted; `order` must be topological."""
    closures: dict[str, frozenset[str]] = {}
    for task in order:
        needs = dependencies[task]
        if not needs:
            closures[task] = frozenset()
            continue
        merged = set(needs)
        for need in needs:
            merged |= closures[need]
        closures[task] = frozenset(merged)
    return {task: sorted(closure) for task, closure in closures.items()}


def transitive_dependents(
    roots: Sequence[str], dependencies: Mapping[str, Sequence[str]]
) -> set[str]:
    """Every task that depends, directly or not, on one of `roots` (roots excluded)."""
    dependents: dict[str, list[str]] = {}
    for task, needs in dependencies.items():
        for need in needs:
            dependents.setdefault(need, []).append(task)
    found: set[str] = set()
    stack = list(roots)
    while stack:
        for dependent in dependents.get(stack.pop(), ()):
            if dependent not in found:
                found.add(dependent)
                stack.append(dependent)
    return found - set(roots)
