"""Reading a repository's imm files — config, initiatives, intents — for the commands."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from imm_action.carriers.committed import (
    UNCOMMITTED_NOTE,
    CommittedInputs,
    committed_inputs,
    project_prefix,
    uncommitted_inputs,
)
from imm_action.carriers.intents import IntentFile, read_intents, refuse_branch_check_ids
from imm_action.carriers.observed import LocatedInitiative
from imm_action.carriers.source import InitiativeSource, initiatives_at
from imm_action.errors import InputError, Problem, UsageError
from imm_action.git import GitError, work_tree_top
from imm_action.git.repo import GitRepo
from imm_action.model.common import GIT_OID_PATTERN
from imm_action.model.config import (
    CONFIG_PATH,
    GATING_KEYS,
    RepoConfig,
    branch_check_ids,
    meant_key,
    one_edit_apart,
)
from imm_action.model.intent import ValidIntent
from imm_action.model.plan import BatchPlan
from imm_action.model.validation import located_messages
from imm_action.plan.dag import CycleError
from imm_action.plan.project import PlanInputError, PlanOptions, build_plan

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
    return locate_repo(path)[0]


def locate_repo(path: Path) -> tuple[Path, Path]:
    """`open_repo`'s project directory, and the top of the work tree it lies in."""
    if not path.is_dir():
        raise UsageError(f"--repo {path}: no such directory")
    try:
        top = work_tree_top(path)
    except GitError:
        top = None
    if top is None:
        raise UsageError(f"--repo {path}: not inside a git work tree (run: git init)")
    return path.resolve(), top


# The action's `config` input: the config's path relative to the repository root.
CONFIG_VARIABLE = "IMM_CONFIG"


def config_path(environ: Mapping[str, str] = os.environ) -> str:
    """Where the repository config lies: `IMM_CONFIG` when set, else `.github/imm.yml`. A path
    that could leave the repository (absolute, `..`) or is not YAML is a usage error."""
    given = environ.get(CONFIG_VARIABLE, "").strip()
    if not given:
        return CONFIG_PATH
    parts = given.split("/")
    if (
        given.startswith("/")
        or "\\" in given
        or any(part in ("", ".", "..") for part in parts)
        or not given.endswith((".yml", ".yaml"))
    ):
        raise UsageError(
            f"{CONFIG_VARIABLE}={given!r}: the config must be a .yml file inside the repository, "
            "named relative to its root (like .github/imm.yml), without '.' or '..'"
        )
    return given


MAX_CONFIG_BYTES = 256 * 1024
# A config is a few dozen nodes; aliases may not expand it beyond this (a "billion laughs" file
# of a few hundred bytes would otherwise expand to gigabytes when read).
MAX_CONFIG_NODES = 10_000


def load_config(repo: Path, relative: str | None = None) -> LoadedConfig:
    """`.github/imm.yml` (or the path `IMM_CONFIG` names), or the defaults when it is absent;
    unknown keys become warnings.

    The file is untrusted (a pull request may change it): it must be a regular file inside the
    repository (no symlink on its path, so nothing outside is ever read or echoed), at most
    256 KiB, UTF-8 text; it is read with a safe loader that refuses duplicate keys and alias
    expansion beyond a small bound."""
    relative = relative or config_path()
    return _config_of(_config_bytes(repo, relative), relative)


def load_config_at(repo: Path, commit: str, relative: str | None = None) -> LoadedConfig:
    """The config as `commit` holds it, under the same rules as `load_config`. A lane reads
    the config of its batch's plan commit (ADR 0034): not the user's working tree, not a lane
    base a lane may have changed — what the batch was planned with runs its lanes."""
    relative = relative or config_path()
    key = (str(repo), commit, relative)
    known = _CONFIGS_AT.get(key)
    if known is not None:
        return known
    git = GitRepo(repo)
    try:
        loaded = _config_of(_committed_config_bytes(git, commit, relative), relative)
    finally:
        git.close()
    if re.fullmatch(GIT_OID_PATTERN, commit):  # what a commit holds never changes; a branch's does
        _CONFIGS_AT[key] = loaded
    return loaded


# Configs read at a commit, by (repository, commit id, path): `imm run` reads the batch's
# before it forks its lanes, so that no lane parses it again.
_CONFIGS_AT: dict[tuple[str, str, str], LoadedConfig] = {}


def _committed_config_bytes(repo: GitRepo, commit: str, relative: str) -> bytes | None:
    found = repo.tree_entries(commit, [relative], recursive=False).get(relative)
    if found is None:
        _refuse_linked_folders(repo, commit, relative)
        return None
    if found.is_link:
        raise InputError([Problem(relative, None, "must be a regular file (not a link)")])
    if not found.is_file:
        raise InputError([Problem(relative, None, "must be a regular file")])
    if found.size is not None and found.size > MAX_CONFIG_BYTES:
        raise InputError([Problem(relative, None, f"is larger than {MAX_CONFIG_BYTES} bytes")])
    raw = repo.read_blob(found.oid) or b""
    if b"\0" in raw:
        raise InputError([Problem(relative, None, "is not a text file (binary content)")])
    return raw


def _refuse_linked_folders(repo: GitRepo, commit: str, relative: str) -> None:
    """A config reached through a symlinked folder is refused, as in a working tree."""
    parts = relative.split("/")
    for depth in range(1, len(parts)):
        where = "/".join(parts[:depth])
        entry = repo.tree_entries(commit, [where], recursive=False).get(where)
        if entry is None:
            return
        if entry.is_link:
            raise InputError(
                [Problem(relative, None, f"must be a regular file in the repository ({where} "
                         "is a symbolic link; its target is not read)")]
            )  # fmt: skip


def _config_of(raw: bytes | None, relative: str) -> LoadedConfig:
    if raw is None:
        return LoadedConfig(RepoConfig(), ())
    data = _parse_config(raw, relative)
    if data is None:
        return LoadedConfig(RepoConfig(), ())
    if not isinstance(data, dict):
        raise InputError([Problem(relative, 1, "must be a mapping of settings")])
    plain = _plain(data)
    try:
        config = RepoConfig.model_validate(plain)
    except ValidationError as error:
        raise InputError(
            [
                Problem(relative, _yaml_line(data, loc), f"{'.'.join(map(str, loc))}: {message}")
                for loc, message in located_messages(error)
            ]
        ) from None
    return LoadedConfig(config, tuple(_unknown_keys(data, RepoConfig.model_fields, (), relative)))


def _config_bytes(repo: Path, relative: str) -> bytes | None:
    """The config file's bytes; None when there is none. Refused before reading: links,
    non-regular files, anything over the size limit, binary content."""
    current = repo
    parts = relative.split("/")
    for depth, part in enumerate(parts):
        current = current / part
        try:
            mode = current.lstat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            where = "/".join(parts[: depth + 1])
            raise InputError(
                [Problem(relative, None, f"must be a regular file in the repository ({where} "
                         "is a symbolic link; its target is not read)")]
            )  # fmt: skip
    status = current.lstat()
    if not stat.S_ISREG(status.st_mode):
        raise InputError([Problem(relative, None, "must be a regular file")])
    if status.st_size > MAX_CONFIG_BYTES:
        raise InputError(
            [Problem(relative, None, f"is {status.st_size} bytes; at most "
                     f"{MAX_CONFIG_BYTES // 1024} KiB are allowed")]
        )  # fmt: skip
    fd = os.open(current, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise InputError([Problem(relative, None, f"is larger than {MAX_CONFIG_BYTES} bytes")])
    if b"\0" in raw:
        raise InputError([Problem(relative, None, "is not a text file (binary content)")])
    return raw


def _parse_config(raw: bytes, relative: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import YAMLError

    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        at = raw[: error.start].count(b"\n") + 1
        raise InputError([Problem(relative, at, "is not a text file (not UTF-8)")]) from None
    try:
        nodes = _expanded_size(YAML(typ="rt").compose(text))
        if nodes > MAX_CONFIG_NODES:
            raise InputError(
                [Problem(relative, None, f"aliases expand it to more than {MAX_CONFIG_NODES} "
                         "values; write the settings out instead")]
            )  # fmt: skip
        return YAML(typ="rt").load(text)
    except DuplicateKeyError as error:
        key = str(error.problem or "").split('"')[1:2]
        what = f'duplicate key "{key[0]}"' if key else "a duplicate key"
        raise InputError([Problem(relative, _mark_line(error), what)]) from None
    except YAMLError as error:
        why = getattr(error, "problem", None) or str(error).splitlines()[0]
        problem = Problem(relative, _mark_line(error), f"is not valid YAML: {why}")
        raise InputError([problem]) from None


def _mark_line(error: Exception) -> int | None:
    mark = getattr(error, "problem_mark", None)
    return int(mark.line) + 1 if mark is not None else None


def _expanded_size(root: Any) -> int:
    """How many values the document has with every alias expanded — counted without expanding
    (memoised per node, so a shared node is counted once per use, cheaply), stopping early."""
    sizes: dict[int, int] = {}

    def size(node: Any, depth: int) -> int:
        if node is None:
            return 0
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth > 100:
            return MAX_CONFIG_NODES + 1
        total = 1
        value = node.value
        if isinstance(value, list):
            for item in value:
                parts = item if isinstance(item, tuple) else (item,)
                for part in parts:
                    total += size(part, depth + 1)
                    if total > MAX_CONFIG_NODES:
                        break
        sizes[id(node)] = total
        return total

    return size(root, 0)


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


def _unknown_keys(
    data: Any, fields: Mapping[str, Any], prefix: tuple[str, ...], relative: str
) -> list[Problem]:
    """Unknown keys, as warnings with a did-you-mean: an older imm, pinned, must read a newer
    config (docs/formats.md). One edit away from a key that gates (GATING_KEYS) is refused
    instead: misspelled, it would gate nothing (ADR 0060)."""
    warnings = []
    refused = []
    for key, value in data.items():
        name = ".".join((*prefix, str(key)))
        if key not in fields:
            line = data.lc.key(key)[0] + 1
            gating = sorted(
                known for known in GATING_KEYS
                if not prefix and known in fields and one_edit_apart(str(key), known)
            )  # fmt: skip
            if gating:
                refused.append(Problem(relative, line, (
                    f"{name!r} is not a setting; did you mean {gating[0]!r}? A misspelled "
                    f"{gating[0]!r} would be ignored, so imm refuses it"
                )))  # fmt: skip
                continue
            meant = meant_key(str(key), fields)
            hint = f"; did you mean {meant!r}?" if meant else ""
            warnings.append(
                Problem(relative, line, f"warning: unknown setting {name!r} is ignored{hint}")
            )
        elif key == "commands" and isinstance(value, dict):
            from imm_action.model.config import CommandsConfig

            warnings.extend(
                _unknown_keys(value, CommandsConfig.model_fields, (*prefix, "commands"), relative)
            )
    if refused:
        raise InputError(refused)
    return warnings


def uncommitted_files(project: Path) -> list[str]:
    """Initiative and intent files that differ from what is committed (staged or not)."""
    repo = GitRepo(project)
    try:
        return uncommitted_inputs(repo, project_prefix(repo, project))
    except GitError:
        return []
    finally:
        repo.close()


def uncommitted_note(project: Path) -> str | None:
    """One line when initiative or intent files differ from what is committed."""
    changed = uncommitted_files(project)
    if not changed:
        return None
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"imm: note: {UNCOMMITTED_NOTE} (uncommitted: {shown})"


def load_intents(inputs: CommittedInputs, located: LocatedInitiative) -> dict[str, IntentFile]:
    return read_intents(inputs, (task.task_id for task in located.initiative.tasks))


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
    integrated_before: Mapping[str, str] | None = None,
    initiatives: InitiativeSource,
    issue: int | None = None,
    commit: str | None = None,
) -> tuple[BatchPlan, dict[str, IntentFile]]:
    """Read everything a plan needs — the initiative from its source (`issue`: the number of
    the issue carrying it, when known), the intents — from `commit` (default HEAD) of `repo`,
    never the working tree (what is planned is what lanes will read), and project it."""
    inputs = committed_inputs(repo, commit)
    located = initiatives_at(initiatives, inputs.commit).read(slug, issue)
    intents = refuse_branch_check_ids(
        inputs, load_intents(inputs, located), branch_check_ids(config.branch_checks),
        config_path(),
    )  # fmt: skip
    options = PlanOptions(
        max_parallel=max_parallel if max_parallel is not None else config.max_parallel,
        qa_failure_limit=config.qa_failure_limit,
        max_children=config.max_children,
        integrated_before=integrated_before or {},
    )
    readings = {task_id: file.reading for task_id, file in intents.items()}
    try:
        plan = build_plan(located.initiative, readings, options)
    except CycleError as error:
        raise InputError(located.cycle_problems(error)) from None
    except PlanInputError as error:
        raise UsageError(str(error)) from None
    return plan, intents
