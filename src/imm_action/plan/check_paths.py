"""The repository paths a task's checks name, and the tasks whose scope may change them (pure).

A check runs a file or names one as an argument (`python3 tests/test_c.py`, `pytest tests/c`):
that path — and what lies below it, when it is a folder — belongs to the task whose check names
it, and no other lane may add, change or remove it (`lane_touches_check`, issue 42 #2). A task
whose scope covers such a path is found when the plan is read (`scope_covers_check`, issue 42
#3), before any lane spends an agent's time on a change that must be refused."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from imm_action.model.descriptor import DescriptorCommand, DescriptorError, parse_descriptor
from imm_action.model.intent import TaskIntent
from imm_action.plan.scope import scopes_overlap

SCOPE_COVERS_CHECK = "scope_covers_check"


def named_paths(command: DescriptorCommand) -> list[str]:
    """What a descriptor's command may name as a repository path, as repository paths: its
    `./` executable (repository-relative) and each argument (read from its cwd)."""
    folder = "" if command.cwd == "." else command.cwd
    named = [_joined("", command.executable[2:])] if command.executable.startswith("./") else []
    arguments = list(command.argv)
    for position, argument in enumerate(arguments):
        if argument[:1] in ("-", "/") or (position and arguments[position - 1] == "-c"):
            continue  # an option, a path outside the tree, or the code of `python3 -c`
        named.append(_joined(folder, argument))
    return [path for path in named if path is not None]


def _joined(folder: str, relative: str) -> str | None:
    """`folder/relative` normalised, or None when it leaves the repository or enters .git."""
    parts: list[str] = []
    for part in [*folder.split("/"), *relative.split("/")]:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    if not parts or ".git" in parts:
        return None  # the repository's root (`pytest .`) is no task's: it holds every path
    return "/".join(parts)


@dataclass(frozen=True, order=True)
class ScopeCoversCheck:
    """`task`'s scope covers `path`, which `owner`'s check names."""

    task: str
    path: str
    owner: str

    def message(self) -> str:
        return (
            f"{SCOPE_COVERS_CHECK}: {self.task} may change {self.path}, named by "
            f"{self.owner}'s check; a lane of {self.task} that changes it is refused "
            f"(lane_touches_check) — narrow {self.task}'s scope_hint to leave {self.path} out, "
            f"or make {self.owner}'s check not name it"
        )


def scope_check_conflicts(
    scopes: Mapping[str, Sequence[str]], named: Mapping[str, Collection[str]]
) -> list[ScopeCoversCheck]:
    """Every (task, path, owner) where `task`'s scope may change `path` (or what lies below it)
    and only `owner`'s check names it. `named`: path -> the tasks whose checks name it."""
    found: list[ScopeCoversCheck] = []
    for path, owners in named.items():
        for task, scope in scopes.items():
            if task in owners or not scope:
                continue
            if scopes_overlap(scope, [path, f"{path}/**"]):
                found.extend(ScopeCoversCheck(task, path, owner) for owner in sorted(owners))
    return sorted(found)


def intent_conflicts(intents: Mapping[str, TaskIntent]) -> list[ScopeCoversCheck]:
    """`scope_check_conflicts` of the tasks' intents: their scope hints, and the paths their
    acceptance checks name (a descriptor that does not parse names nothing: `imm check` reports
    it on its own)."""
    named: dict[str, set[str]] = {}
    for task, intent in intents.items():
        for item in intent.acceptance:
            try:
                descriptor = parse_descriptor(item.verification)
            except DescriptorError:
                continue
            for path in named_paths(descriptor.command):
                named.setdefault(path, set()).add(task)
    scopes = {task: tuple(intent.scope_hint) for task, intent in intents.items()}
    return scope_check_conflicts(scopes, named)
