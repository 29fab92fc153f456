"""`/imm …` lines in issue comments (SPEC §5.3), parsed as plain data — never a shell, never a
workflow expression. Comment text is untrusted: whatever it holds, it only ever becomes one of
these values or a help answer."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

from imm_action.model.common import is_identifier
from imm_action.model.plan import MAX_PARALLEL_LIMIT

Verb = Literal["run", "status", "plan", "retry", "cancel"]
HELP = (
    "imm understands one command per line:\n"
    "- `/imm run [--max-parallel N]` start or resume the batch\n"
    "- `/imm status` show the batch\n"
    "- `/imm plan` show the plan without running anything\n"
    "- `/imm retry <task_id>` send a parked task and its skipped dependents back to pending\n"
    "- `/imm cancel` cancel the batch"
)
_PREFIX = re.compile(r"/imm(?:\s+|$)")


@dataclass(frozen=True)
class Command:
    verb: Verb
    task_id: str | None = None
    max_parallel: int | None = None


@dataclass(frozen=True)
class Unknown:
    line: str
    why: str


Parsed = Command | Unknown


def parse_comment(body: str) -> list[Parsed]:
    """Every `/imm` line, in order; quoted (`>`) lines and fenced code are not commands."""
    parsed: list[Parsed] = []
    fenced = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or line.startswith(">") or not _PREFIX.match(line):
            continue
        parsed.append(parse_line(line))
    return parsed


def parse_line(line: str) -> Parsed:
    try:
        words = shlex.split(line[len("/imm") :])
    except ValueError as error:
        return Unknown(line, f"it could not be read ({error})")
    if not words:
        return Unknown(line, "it names no command")
    verb, args = words[0], words[1:]
    if verb in ("status", "plan", "cancel"):
        return Command(verb) if not args else Unknown(line, f"`{verb}` takes no arguments")  # type: ignore[arg-type]
    if verb == "retry":
        if len(args) == 1 and is_identifier(args[0]):
            return Command("retry", task_id=args[0])
        return Unknown(line, "`retry` takes one task id")
    if verb == "run":
        return _run(line, args)
    shown = verb[:40].replace("`", "'")
    return Unknown(line, f"`{shown}` is not an imm command")


def _run(line: str, args: list[str]) -> Parsed:
    if not args:
        return Command("run")
    if len(args) == 2 and args[0] == "--max-parallel" and args[1].isdigit():
        value = int(args[1])
        if 1 <= value <= MAX_PARALLEL_LIMIT:
            return Command("run", max_parallel=value)
        return Unknown(line, f"--max-parallel must be between 1 and {MAX_PARALLEL_LIMIT}")
    return Unknown(line, "`run` takes only `--max-parallel N`")
