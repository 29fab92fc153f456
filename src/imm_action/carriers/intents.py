"""Reading Task Intents from a repository work tree (SPEC §4.2 file rules)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from imm_action.errors import Problem
from imm_action.model.intent import MAX_INTENT_BYTES, TaskIntent
from imm_action.model.validation import json_path, located_messages
from imm_action.plan.project import IntentReading, InvalidIntent, ValidIntent, intent_path


@dataclass(frozen=True)
class IntentFile:
    """One intent file's verdict: the reading the planner uses and the problems `check` prints."""

    reading: IntentReading
    problems: tuple[Problem, ...]


def read_intents(repo: Path, task_ids: Iterable[str], tracked: set[str]) -> dict[str, IntentFile]:
    return {task_id: read_intent(repo, task_id, tracked) for task_id in task_ids}


def read_intent(repo: Path, task_id: str, tracked: set[str]) -> IntentFile:
    relative = intent_path(task_id)
    refusal = _file_refusal(repo, relative, tracked)
    if refusal is not None:
        return _invalid([Problem(relative, None, refusal)])
    data = (repo / relative).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return _invalid([Problem(relative, data[: error.start].count(b"\n") + 1, "is not UTF-8")])
    return parse_intent_text(text, relative, task_id)


def parse_intent_text(text: str, relative: str, task_id: str) -> IntentFile:
    try:
        intent = TaskIntent.model_validate_json(text)
    except ValidationError as error:
        return _invalid(_located_problems(text, relative, error))
    if intent.task_id != task_id:
        line = locate_json_path(text, ("task_id",))
        return _invalid(
            [Problem(relative, line, f"task_id {intent.task_id!r} must equal the file name's {task_id!r}")]
        )
    return IntentFile(ValidIntent(intent, intent.content_hash()), ())


def _file_refusal(repo: Path, relative: str, tracked: set[str]) -> str | None:
    # No symlink anywhere in the path: a link could point an intent outside the repository.
    current = repo
    parts = relative.split("/")
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            return "intent file is missing"
        if stat.S_ISLNK(mode):
            where = "/".join(parts[: index + 1])
            return f"must not be reached through a symlink ({where} is a link)"
    if not stat.S_ISREG(mode):
        return "must be a regular file"
    if current.stat().st_size > MAX_INTENT_BYTES:
        return f"is larger than {MAX_INTENT_BYTES} bytes"
    if relative not in tracked:
        return "is not tracked by git (run: git add " + relative + ")"
    return None


def _invalid(problems: list[Problem]) -> IntentFile:
    why = "; ".join(problem.render() for problem in problems)
    return IntentFile(InvalidIntent(why), tuple(problems))


def _located_problems(text: str, relative: str, error: ValidationError) -> list[Problem]:
    syntax = _syntax_problem(text, relative)
    if syntax is not None:
        return [syntax]
    problems = []
    for loc, message in located_messages(error):
        label = json_path(loc) or "(root)"
        problems.append(Problem(relative, locate_json_path(text, loc), f"{label}: {message}"))
    return problems


def _syntax_problem(text: str, relative: str) -> Problem | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return Problem(relative, error.lineno, f"is not valid JSON: {error.msg} (column {error.colno})")
    return None


def locate_json_path(text: str, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest existing node on `loc` (the key's line for object members)."""
    import json_source_map  # only on the error path: it is pure Python and slow on big files

    try:
        entries = json_source_map.calculate(text)
    except Exception:  # noqa: BLE001 - a map we cannot build only costs the line number
        return None
    for depth in range(len(loc), -1, -1):
        pointer = "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc[:depth])
        entry = entries.get(pointer)
        if entry is not None:
            start = entry.key_start or entry.value_start
            return int(start.line) + 1
    return None
