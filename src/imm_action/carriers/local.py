"""The `docs/initiatives/<slug>.md` carrier (SPEC §4.4), parsed as the reference parses it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from imm_action.carriers.committed import INITIATIVES, UNCOMMITTED_NOTE, CommittedInputs
from imm_action.carriers.observed import (
    LocatedInitiative,
    Location,
    ObservedDependency,
    ObservedTask,
    normalise,
)
from imm_action.errors import InputError, Problem
from imm_action.model.common import id_problem
from imm_action.model.initiative import LocalCarrier
from imm_action.plan.scope import js_trim

MAX_INITIATIVE_BYTES = 1024 * 1024

_SLICE_HEADING = re.compile(r"##\s+([^\s:]+)\s*:")
_BLOCKED_BY = re.compile(r"blocked by\s*:(.*)", re.IGNORECASE)
_TASKS = re.compile(r"tasks\s*:\s*", re.IGNORECASE)
_BULLET = re.compile(r"[-*]\s+(.*)")
_QUOTED = re.compile(r"`(.*)`")


def initiative_path(slug: str) -> str:
    return f"docs/initiatives/{slug}.md"


def has_local_initiative(inputs: CommittedInputs, slug: str) -> bool:
    """Whether the local carrier applies (the file is committed); a link or folder there is an
    error, not a miss."""
    relative = initiative_path(slug)
    link = inputs.folder_link(INITIATIVES)
    if link is not None:
        raise InputError([Problem(relative, None, f"must not be reached through a symlink ({link} "
                                  "is a link)")])  # fmt: skip
    entry = inputs.entry(relative)
    if entry is None:
        return False
    if not entry.is_file:
        raise InputError([Problem(relative, None, "must be a regular file (not a link or folder)")])
    return True


@dataclass
class _Slice:
    slice_id: str
    line: int
    tasks: list[tuple[str, int]] = field(default_factory=list)
    blocked_by: list[tuple[str, int]] = field(default_factory=list)


def read_local_initiative(inputs: CommittedInputs, slug: str) -> LocatedInitiative:
    relative = initiative_path(slug)
    if (why := id_problem(slug)) is not None:
        raise InputError(
            [Problem(relative, None, f"initiative slug {slug!r} is not a valid id: {why}")]
        )
    if not has_local_initiative(inputs, slug):
        if inputs.in_working_tree(relative):
            why = f"is not committed ({UNCOMMITTED_NOTE})"
            raise InputError([Problem(relative, None, why)])
        raise InputError([Problem(relative, None, "no such initiative file")])
    entry = inputs.entry(relative)
    if entry is None:
        raise InputError([Problem(relative, None, "no such initiative file")])
    if entry.size is not None and entry.size > MAX_INITIATIVE_BYTES:
        raise InputError([Problem(relative, None, f"is larger than {MAX_INITIATIVE_BYTES} bytes")])
    data = inputs.read(relative) or b""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError([Problem(relative, line, "is not valid UTF-8")]) from None
    return parse_local_initiative(text, slug, relative)


def parse_local_initiative(text: str, slug: str, path: str) -> LocatedInitiative:
    slices = _scan_slices(text.removeprefix("\ufeff"))  # a BOM is read past, as in intents
    if not slices:
        raise InputError(
            [Problem(path, None, "declares no Slice (start one with '## <slice_id>: <title>')")]
        )
    problems: list[Problem] = []
    observed: list[ObservedTask] = []
    for piece in slices:
        if len(piece.tasks) != 1:
            problems.append(
                Problem(
                    path,
                    piece.line,
                    f"Slice {piece.slice_id} names {len(piece.tasks)} Tasks; each Slice must "
                    "name exactly one Task under 'Tasks:' to run as a batch child",
                )
            )
            continue
        task_id, _ = piece.tasks[0]
        observed.append(
            ObservedTask(
                task_id=task_id,
                slice_id=piece.slice_id,
                blocked_by=tuple(
                    ObservedDependency(dep, Location(path, line)) for dep, line in piece.blocked_by
                ),
                location=Location(path, piece.tasks[0][1]),
            )
        )
    if problems:
        raise InputError(problems)
    return normalise(slug, LocalCarrier(path=path), observed, Location(path, None))


def _scan_slices(text: str) -> list[_Slice]:
    slices: list[_Slice] = []
    in_tasks = False
    fenced = False
    for number, raw in enumerate(re.split(r"\r?\n", text), start=1):
        line = js_trim(raw)
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _SLICE_HEADING.match(line)
        if heading:
            slices.append(_Slice(heading.group(1), number))
            in_tasks = False
            continue
        if not slices:
            continue
        current = slices[-1]
        if _TASKS.fullmatch(line):
            in_tasks = True
            continue
        blocked = _BLOCKED_BY.fullmatch(line)
        if blocked:
            names = (_unquote(part) for part in blocked.group(1).split(","))
            current.blocked_by.extend((name, number) for name in names if name)
            in_tasks = False
            continue
        bullet = _BULLET.fullmatch(line)
        if in_tasks and bullet:
            current.tasks.append((_unquote(bullet.group(1)), number))
        elif line:
            in_tasks = False
    return slices


def _unquote(value: str) -> str:
    trimmed = js_trim(value)
    quoted = _QUOTED.fullmatch(trimmed)
    return quoted.group(1) if quoted else trimmed
