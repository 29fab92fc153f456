"""Reading Task Intents from a repository work tree (SPEC §4.2 file rules)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from imm_action.errors import Problem
from imm_action.model.intent import MAX_INTENT_BYTES, TaskIntent
from imm_action.model.validation import json_path, located_messages
from imm_action.plan.project import IntentReading, InvalidIntent, ValidIntent, intent_path

PLANS_FOLDER = ("docs", "plans")


@dataclass(frozen=True)
class IntentFile:
    """One intent file's verdict: the reading the planner uses and the problems `check` prints."""

    reading: IntentReading
    problems: tuple[Problem, ...]


def read_intents(repo: Path, task_ids: Iterable[str], tracked: set[str]) -> dict[str, IntentFile]:
    folder_refusal = _folder_refusal(repo)  # the shared folders, checked once for all files
    if folder_refusal is not None:
        return {
            task_id: _invalid([Problem(intent_path(task_id), None, folder_refusal)])
            for task_id in task_ids
        }
    return {task_id: _read_in_checked_folder(repo, task_id, tracked) for task_id in task_ids}


def read_intent(repo: Path, task_id: str, tracked: set[str]) -> IntentFile:
    return read_intents(repo, [task_id], tracked)[task_id]


def _read_in_checked_folder(repo: Path, task_id: str, tracked: set[str]) -> IntentFile:
    relative = intent_path(task_id)
    refusal = _file_refusal(repo, relative, tracked)
    if refusal is not None:
        return _invalid([Problem(relative, None, refusal)])
    with open(os.path.join(repo, relative), "rb") as handle:  # str paths: pathlib costs 10%
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return _invalid([Problem(relative, data[: error.start].count(b"\n") + 1, "is not UTF-8")])
    return parse_intent_text(text, relative, task_id)


def parse_intent_text(text: str, relative: str, task_id: str) -> IntentFile:
    text = text.removeprefix(BOM)  # a BOM is read past, in intents as in initiatives
    duplicate = duplicate_key_problem(text, relative)
    if duplicate is not None:
        return _invalid([duplicate])
    try:
        intent = TaskIntent.model_validate_json(text)
    except ValidationError as error:
        return _invalid(_located_problems(text, relative, error))
    if intent.task_id != task_id:
        line = locate_json_path(text, ("task_id",))
        return _invalid(
            [
                Problem(
                    relative,
                    line,
                    f"task_id {intent.task_id!r} must equal the file name's {task_id!r}",
                )
            ]
        )
    return IntentFile(ValidIntent(intent, intent.content_hash()), ())


BOM = "\ufeff"


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def duplicate_key_problem(text: str, relative: str) -> Problem | None:
    """A JSON object with the same key twice (JSON parsers silently keep the last one, so the
    file would not mean what it seems to): the key and the line of its second occurrence."""
    try:
        json.loads(text, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as duplicate:
        found = [
            m.start() for m in re.finditer(re.escape(json.dumps(duplicate.key)) + r"\s*:", text)
        ]
        line = text[: found[1]].count("\n") + 1 if len(found) > 1 else None
        return Problem(relative, line, f"duplicate key {json.dumps(duplicate.key)}")
    except ValueError:
        return None  # not JSON at all: the validation reports where
    return None


def _folder_refusal(repo: Path) -> str | None:
    # No symlink anywhere in the path: a link could point an intent outside the repository.
    current = repo
    for part in PLANS_FOLDER:
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            return "intent file is missing"
        if stat.S_ISLNK(mode):
            where = "/".join(PLANS_FOLDER[: PLANS_FOLDER.index(part) + 1])
            return f"must not be reached through a symlink ({where} is a link)"
    return None


def _file_refusal(repo: Path, relative: str, tracked: set[str]) -> str | None:
    try:
        status = os.lstat(os.path.join(repo, relative))
    except FileNotFoundError:
        return "intent file is missing"
    if stat.S_ISLNK(status.st_mode):
        return f"must not be reached through a symlink ({relative} is a link)"
    if not stat.S_ISREG(status.st_mode):
        return "must be a regular file"
    if status.st_size > MAX_INTENT_BYTES:
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
        return Problem(
            relative, error.lineno, f"is not valid JSON: {error.msg} (column {error.colno})"
        )
    return None


def locate_json_path(text: str, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest existing node on `loc` (the key's line for object members)."""
    import json_source_map  # only on the error path: it is pure Python and slow on big files

    try:
        entries = json_source_map.calculate(text)
    except Exception:
        return None
    for depth in range(len(loc), -1, -1):
        pointer = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc[:depth]
        )
        entry = entries.get(pointer)
        if entry is not None:
            start = entry.key_start or entry.value_start
            return int(start.line) + 1
    return None
