"""Reading Task Intents from a commit (SPEC §4.2 file rules; carriers/committed.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from imm_action.carriers.committed import PLANS, UNCOMMITTED_NOTE, CommittedInputs
from imm_action.errors import Problem
from imm_action.model.intent import (
    MAX_INTENT_BYTES,
    IntentReading,
    InvalidIntent,
    TaskIntent,
    ValidIntent,
    intent_path,
)
from imm_action.model.plan import BatchPlan
from imm_action.model.validation import json_path, located_messages
from imm_action.plan.check_paths import ancestors_with, cover_warnings, intent_conflicts


@dataclass(frozen=True)
class IntentFile:
    """One intent file's verdict: the reading the planner uses and the problems `check` prints."""

    reading: IntentReading
    problems: tuple[Problem, ...]


def read_intents(inputs: CommittedInputs, task_ids: Iterable[str]) -> dict[str, IntentFile]:
    """Each task's intent as committed (SPEC §4.2 file rules on the tree entries)."""
    wanted = list(task_ids)
    link = inputs.folder_link(PLANS)
    if link is not None:  # the shared folders, checked once for all files
        refusal = f"must not be reached through a symlink ({link} is a link)"
        return {
            task_id: _invalid([Problem(intent_path(task_id), None, refusal)]) for task_id in wanted
        }
    inputs.prefetch(intent_path(task_id) for task_id in wanted)
    return {task_id: _read_committed(inputs, task_id) for task_id in wanted}


def valid_intents(files: Mapping[str, IntentFile]) -> dict[str, TaskIntent]:
    """The intents of `files` that are valid, by task id."""
    return {
        task: file.reading.intent
        for task, file in files.items()
        if isinstance(file.reading, ValidIntent)
    }


def plan_cover_warnings(
    plan: BatchPlan, files: Mapping[str, IntentFile]
) -> tuple[tuple[str, str], ...]:
    """(task, warning) for each scope that covers another task's named path where the plan's
    order does not let it change the path (issue 58): what `imm plan` and `imm run` say."""
    closures = {child.task_id: child.blocked_by for child in plan.children}
    ancestors = ancestors_with(closures, plan.runs_after())
    conflicts = intent_conflicts(valid_intents(files))
    return tuple((conflict.task, said) for conflict, said in cover_warnings(conflicts, ancestors))


def refuse_branch_check_ids(
    inputs: CommittedInputs,
    files: Mapping[str, IntentFile],
    branch_ids: Mapping[str, str],
    config_file: str,
) -> dict[str, IntentFile]:
    """`files`, each valid intent with an acceptance item whose check id (`<task>:<item>`) is a
    branch check's (`branch:<name>`, in a task named `branch`) made invalid at that item's
    line: failures and verdicts are matched to their commands by id, and one id for two
    commands could show a reader the wrong one."""
    found = dict(files)
    for task_id, file in files.items():
        if not isinstance(file.reading, ValidIntent):
            continue
        ids = [f"{task_id}:{item.id}" for item in file.reading.intent.acceptance]
        clashing = [(at, check_id) for at, check_id in enumerate(ids) if check_id in branch_ids]
        if not clashing:
            continue
        relative = intent_path(task_id)
        text = (inputs.read(relative) or b"").decode("utf-8", "replace").removeprefix(BOM)
        found[task_id] = _invalid(
            [
                Problem(
                    relative,
                    locate_json_path(text, ("acceptance", at, "id")),
                    f"acceptance.{at}.id: check id {check_id} is also branch check "
                    f"{branch_ids[check_id]}'s ({config_file}): rename the acceptance item or "
                    "the branch check",
                )
                for at, check_id in clashing
            ]
        )
    return found


def read_intent(inputs: CommittedInputs, task_id: str) -> IntentFile:
    return read_intents(inputs, [task_id])[task_id]


def _read_committed(inputs: CommittedInputs, task_id: str) -> IntentFile:
    relative = intent_path(task_id)
    refusal = _entry_refusal(inputs, relative)
    if refusal is not None:
        return _invalid([Problem(relative, None, refusal)])
    data = inputs.read(relative)
    if data is None:  # listed but not readable as a file: refused like any other bad entry
        return _invalid([Problem(relative, None, "is not a file in the commit")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return _invalid([Problem(relative, data[: error.start].count(b"\n") + 1, "is not UTF-8")])
    return parse_intent_text(text, relative, task_id)


def _entry_refusal(inputs: CommittedInputs, relative: str) -> str | None:
    entry = inputs.entry(relative)
    if entry is None:
        if inputs.in_working_tree(relative):
            return f"is not committed ({UNCOMMITTED_NOTE}: git add {relative} && git commit)"
        return "intent file is missing"
    if entry.is_link:
        return f"must not be reached through a symlink ({relative} is a link)"
    if not entry.is_file:
        return "must be a regular file"
    if entry.size is not None and entry.size > MAX_INTENT_BYTES:
        return f"is larger than {MAX_INTENT_BYTES} bytes"
    return None


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
