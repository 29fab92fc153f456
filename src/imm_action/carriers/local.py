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
from imm_action.model.common import id_problem, is_identifier
from imm_action.model.initiative import LocalCarrier
from imm_action.plan.scope import js_trim

MAX_INITIATIVE_BYTES = 1024 * 1024

_SLICE_HEADING = re.compile(r"##\s+([^\s:]+)\s*:")
_BLOCKED_BY = re.compile(r"blocked by\s*:(.*)", re.IGNORECASE)
_TASKS = re.compile(r"tasks\s*:\s*", re.IGNORECASE)
_BULLET = re.compile(r"[-*]\s+(.*)")
# A `## heading` that is no Slice heading; a `Key:` line that may be a field spelled otherwise.
_HEADING = re.compile(r"##\s+(\S.*)")
# `##sub: Subtraction`: a Slice heading written without the space the format wants
_HEADING_UNSPACED = re.compile(r"##([^\s#:][^\s:]*)\s*:(.*)")
_FIELD = re.compile(r"([A-Za-z][A-Za-z _-]{0,24}?)\s*:(.*)")
# How people write the two fields when they do not write them as the format says (issue 24 #5).
_NEAR_MISSES = {
    "blockedby": "Blocked by:", "blocked": "Blocked by:", "blockedon": "Blocked by:",
    "dependson": "Blocked by:", "depends": "Blocked by:", "dependencies": "Blocked by:",
    "requires": "Blocked by:", "needs": "Blocked by:", "after": "Blocked by:",
    "task": "Tasks:", "tasklist": "Tasks:",
}  # fmt: skip
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
    slice_id: str | None  # None: a heading meant as a Slice's, without its id (reported)
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
    """The initiative, or every problem of the file at once (issue 24 #5): near-misses of the
    format are errors with a "did you mean", and a problem in one Slice hides no other."""
    near_misses: list[Problem] = []
    slices = _scan_slices(text.removeprefix("\ufeff"), path, near_misses)  # BOM read past
    if not slices:
        raise InputError(
            near_misses
            or [Problem(path, None, "declares no Slice (start one with '## <slice_id>: <title>')")]
        )
    problems = list(near_misses)
    observed: list[ObservedTask] = []
    for piece in slices:
        if piece.slice_id is None:
            continue
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
    try:
        located = normalise(slug, LocalCarrier(path=path), observed, Location(path, None))
    except InputError as error:
        raise InputError(sorted([*problems, *error.problems])) from None
    if problems:
        raise InputError(sorted(problems))
    return located


def _scan_slices(text: str, path: str, near_misses: list[Problem]) -> list[_Slice]:
    lines = [js_trim(raw) for raw in re.split(r"\r?\n", text)]
    slices: list[_Slice] = []
    in_tasks = False
    fenced = False
    for number, line in enumerate(lines, start=1):
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
        unspaced = _HEADING_UNSPACED.fullmatch(line)
        if unspaced:
            # its own Slice, said at its own line: its tasks must not join the last Slice
            slice_id, title = unspaced.group(1), unspaced.group(2).strip()
            hint = f"'{line}' needs a space after '##': write '## {slice_id}: {title}'"
            near_misses.append(Problem(path, number, hint))
            slices.append(_Slice(None, number))
            in_tasks = False
            continue
        if _HEADING.fullmatch(line) and _opens_tasks(lines[number:]):
            # meant as a Slice (a Tasks list follows): its tasks must not join the last Slice
            near_misses.append(Problem(path, number, _heading_without_id(line)))
            slices.append(_Slice(None, number))
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
            continue
        if line:
            in_tasks = False
        meant = _meant_field(line)
        if meant is not None:
            near_misses.append(
                Problem(
                    path, number, f"{line.split(':')[0]}: is not a field; did you mean {meant!r}?"
                )
            )
    return slices


def _meant_field(line: str) -> str | None:
    """The field a `Key: …` line was meant to be, when its key is a known way of misspelling
    one (`Blocked-by:`, `blocked_by:`, `Depends on:`, `Requires:`); None for prose."""
    found = _FIELD.fullmatch(line)
    if found is None or _BLOCKED_BY.fullmatch(line) or _TASKS.fullmatch(line):
        return None
    key = re.sub(r"[\s_-]+", "", found.group(1)).lower()
    return _NEAR_MISSES.get(key)


def _opens_tasks(following: list[str]) -> bool:
    """Whether a `Tasks:` line (or a near miss of one) comes before the next heading."""
    for line in following:
        if line.startswith("#"):
            return False
        if _TASKS.fullmatch(line) or _meant_field(line) == "Tasks:":
            return True
    return False


def _heading_without_id(line: str) -> str:
    """The hint is built from what was typed: `## sub Subtraction` meant `## sub: Subtraction`
    (its first word, an id, then a title); a heading that is all title gets an id made of it."""
    title = line.removeprefix("##").strip()
    first, _, rest = title.partition(" ")
    if rest.strip() and is_identifier(first) and (first.islower() or rest[:1].isupper()):
        meant = f"## {first}: {rest.strip()}"
    else:
        suggested = re.sub(r"[^A-Za-z0-9._-]+", "-", title.lower()).strip("-.") or "slice-1"
        meant = f"## {suggested}: {title}"
    return (
        f"'{line}' opens a Slice without its id: write '## <slice_id>: <title>' "
        f"(did you mean '{meant}'?)"
    )


def _unquote(value: str) -> str:
    trimmed = js_trim(value)
    quoted = _QUOTED.fullmatch(trimmed)
    return quoted.group(1) if quoted else trimmed
