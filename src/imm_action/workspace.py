"""Reading a repository's imm files — config, initiatives, intents — for the commands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from imm_action.carriers.intents import IntentFile, read_intents
from imm_action.carriers.observed import LocatedInitiative
from imm_action.carriers.source import InitiativeSource
from imm_action.errors import InputError, Problem, UsageError
from imm_action.git import GitError, is_work_tree, tracked_paths
from imm_action.model.config import CONFIG_PATH, RepoConfig
from imm_action.model.plan import BatchPlan
from imm_action.model.validation import located_messages
from imm_action.plan.dag import CycleError
from imm_action.plan.project import PlanInputError, PlanOptions, ValidIntent, build_plan

PLANS_DIR = "docs/plans"
INITIATIVES_DIR = "docs/initiatives"


@dataclass(frozen=True)
class LoadedConfig:
    config: RepoConfig
    warnings: tuple[Problem, ...]


def open_repo(path: Path) -> Path:
    """The project directory `--repo` names: it holds `docs/` and lies in a git work tree.

    It need not be the work tree's top, so a project in a sub-folder (like `examples/shop`) can
    be planned and checked in place.
    """
    if not path.is_dir():
        raise UsageError(f"--repo {path}: no such directory")
    try:
        inside = is_work_tree(path)
    except GitError:
        inside = False
    if not inside:
        raise UsageError(f"--repo {path}: not inside a git work tree (run: git init)")
    return path.resolve()


def load_config(repo: Path) -> LoadedConfig:
    """`.github/imm.yml`, or the defaults when it is absent; unknown keys become warnings."""
    file = repo / CONFIG_PATH
    if not file.is_file():
        return LoadedConfig(RepoConfig(), ())
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="rt").load(file.read_text(encoding="utf-8"))
    except YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError([Problem(CONFIG_PATH, line, f"is not valid YAML: {error}")]) from None
    if data is None:
        return LoadedConfig(RepoConfig(), ())
    if not isinstance(data, dict):
        raise InputError([Problem(CONFIG_PATH, 1, "must be a mapping of settings")])
    plain = _plain(data)
    try:
        config = RepoConfig.model_validate(plain)
    except ValidationError as error:
        raise InputError(
            [
                Problem(CONFIG_PATH, _yaml_line(data, loc), f"{'.'.join(map(str, loc))}: {message}")
                for loc, message in located_messages(error)
            ]
        ) from None
    return LoadedConfig(config, tuple(_unknown_keys(data, RepoConfig.model_fields, ())))


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, str):
        return str(node)
    return node


def _yaml_line(data: Any, loc: tuple[int | str, ...]) -> int | None:
    line = None
    node = data
    for part in loc:
        lc = getattr(node, "lc", None)
        try:
            if lc is not None:
                line = (lc.key(part) if isinstance(node, dict) else lc.item(part))[0] + 1
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
    return line


def _unknown_keys(data: Any, fields: Mapping[str, Any], prefix: tuple[str, ...]) -> list[Problem]:
    warnings = []
    for key, value in data.items():
        name = ".".join((*prefix, str(key)))
        if key not in fields:
            line = data.lc.key(key)[0] + 1
            warnings.append(
                Problem(CONFIG_PATH, line, f"warning: unknown setting {name!r} is ignored")
            )
        elif key == "commands" and isinstance(value, dict):
            from imm_action.model.config import CommandsConfig

            warnings.extend(
                _unknown_keys(value, CommandsConfig.model_fields, (*prefix, "commands"))
            )
    return warnings


def load_intents(repo: Path, located: LocatedInitiative) -> dict[str, IntentFile]:
    tracked = tracked_paths(repo, PLANS_DIR)
    return read_intents(repo, (task.task_id for task in located.initiative.tasks), tracked)


def scopes_of(intents: Mapping[str, IntentFile]) -> dict[str, tuple[str, ...]]:
    """Each valid intent's normalised scope, by task id (what admission compares)."""
    return {
        task_id: tuple(file.reading.intent.scope_hint)
        for task_id, file in intents.items()
        if isinstance(file.reading, ValidIntent)
    }


def plan_initiative(
    repo: Path,
    slug: str,
    config: RepoConfig,
    *,
    max_parallel: int | None = None,
    settled: Mapping[str, str] | None = None,
    initiatives: InitiativeSource,
    issue: int | None = None,
) -> tuple[BatchPlan, dict[str, IntentFile]]:
    """Read everything a plan needs — the initiative from its source (`issue`: the number of
    the issue carrying it, when known), the intents from `repo` — and project it."""
    located = initiatives.read(slug, issue)
    intents = load_intents(repo, located)
    options = PlanOptions(
        max_parallel=max_parallel if max_parallel is not None else config.max_parallel,
        qa_failure_limit=config.qa_failure_limit,
        settled=settled or {},
    )
    readings = {task_id: file.reading for task_id, file in intents.items()}
    try:
        plan = build_plan(located.initiative, readings, options)
    except CycleError as error:
        raise InputError(located.cycle_problems(error)) from None
    except PlanInputError as error:
        raise UsageError(str(error)) from None
    return plan, intents
