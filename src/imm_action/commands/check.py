"""`imm check`: validate every initiative and intent; print each problem as `path:line: message`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imm_action.carriers.committed import CommittedInputs, committed_inputs
from imm_action.carriers.intents import (
    IntentFile,
    locate_json_path,
    read_intents,
    refuse_branch_check_ids,
)
from imm_action.carriers.local import initiative_path, read_local_initiative
from imm_action.carriers.observed import LocatedInitiative
from imm_action.console import CommandIO
from imm_action.errors import EXIT_INVALID_INPUT, EXIT_OK, InputError, Problem, UsageError
from imm_action.git import changed_paths
from imm_action.git.repo import GitRepo
from imm_action.integrate.reasons import NO_BRANCH_CHECKS
from imm_action.model.common import is_identifier
from imm_action.model.config import branch_check_ids
from imm_action.model.intent import ValidIntent, intent_path
from imm_action.passes.gate import BranchGate, branch_checks_of
from imm_action.plan.check_paths import (
    cover_warnings,
    intent_conflicts,
    ordered_ancestors,
    scope_plan_conflicts,
)
from imm_action.plan.dag import CycleError
from imm_action.scaffold.suites import LOOKED_FOR, found_suites
from imm_action.text import listed, plural

if TYPE_CHECKING:
    from imm_action.github.client import GitHubClient
from imm_action.workspace import (
    INITIATIVES_DIR,
    PLANS_DIR,
    config_path,
    load_config,
    open_repo,
    uncommitted_files,
)

INTENT_SUFFIX = ".intent.json"


@dataclass(frozen=True)
class CheckArgs:
    repo: Path
    base: str | None
    annotate: bool = False  # also print each problem as a GitHub Actions annotation


@dataclass(frozen=True)
class Validation:
    """What `imm check` found in the repository's input files. (In this code base "check" alone
    is a verification descriptor run on a tree — `verify/checks.py`; the command validates.)"""

    problems: list[Problem]
    warnings: list[Problem]
    initiatives: int
    intents: int
    parsed: tuple[LocatedInitiative, ...] = ()  # the initiatives that parsed, for --base


@dataclass(frozen=True)
class CheckReport:
    """Where a pull request's check is reported: a check run with annotations at file:line."""

    client: GitHubClient
    head_sha: str
    name: str = "imm: check"


def check_annotations(problems: list[Problem], warnings: list[Problem]) -> list[dict[str, object]]:
    """GitHub check-run annotations; a problem without a line points at the file's first line."""
    found = [(problem, "failure") for problem in problems] + [(w, "warning") for w in warnings]
    return [
        {"path": item.path, "start_line": item.line or 1, "end_line": item.line or 1,
         "annotation_level": level, "message": item.message[:64_000]}
        for item, level in found
    ]  # fmt: skip


@dataclass(frozen=True)
class CheckPorts:
    io: CommandIO
    report: CheckReport | None = None  # --report: where the check run goes


def run(args: CheckArgs, ports: CheckPorts) -> int:
    io, report = ports.io, ports.report
    repo = open_repo(args.repo)
    if args.base is not None and GitRepo(repo).resolve(args.base) is None:
        raise UsageError(f"--base {args.base}: no such commit or branch")
    uncommitted = uncommitted_files(repo)
    result = validate_repository(repo)
    problems, warnings = result.problems, result.warnings
    if args.base is not None:
        relevant = _relevant_paths(repo, args.base, result.parsed)
        problems = [problem for problem in problems if problem.path in relevant]
        warnings = [warning for warning in warnings if warning.path in relevant]
    for item in sorted(warnings) + sorted(problems):
        io.say(item.render())
    if args.annotate:
        from imm_action.actions.runtime import annotation

        for item in sorted(warnings):
            io.say(annotation(item, "warning"))
        for item in sorted(problems):
            io.say(annotation(item))
    summary = (
        f"{plural(result.initiatives, 'initiative')}, {plural(result.intents, 'intent')} checked"
    )
    if report is not None:
        title = plural(len(problems), "problem") if problems else "no problems"
        report.client.report_check(
            report.head_sha, report.name,
            conclusion="failure" if problems else "success",
            title=f"{title} ({summary})",
            summary="\n".join(f"- `{p.render()}`" for p in sorted(problems)) or summary,
            annotations=check_annotations(problems, warnings),
        )  # fmt: skip
    if problems:
        io.warn(f"imm check: {plural(len(problems), 'problem')} ({summary})")
        return EXIT_INVALID_INPUT
    if uncommitted:
        # What lanes read is the commit (ADR 0044): a file not committed was not checked, and a
        # gate that says "no problems" about it would mislead.
        io.warn(
            f"imm check: no problems in the committed files ({summary}), but not checked, "
            f"because not committed: {listed(uncommitted)} — imm reads committed files only "
            "(what the lanes read); commit them, then run imm check again"
        )
        return EXIT_INVALID_INPUT
    io.warn(f"imm check: no problems ({summary})")
    return EXIT_OK


def _no_branch_checks(repo: Path) -> Problem:
    """Issue 62 #1: the config sets no branch checks — the suite it could set, where found."""
    found = found_suites(repo)
    proposal = (
        f"the suite found here: branch_checks: [{', '.join(found)}] with held_checks: branch"
        if found
        else f"no suite found here ({LOOKED_FOR})"
    )
    return Problem(config_path(), 1, f"warning: {NO_BRANCH_CHECKS}; {proposal}")


def validate_repository(repo: Path) -> Validation:
    """Every initiative, intent and the config, each problem with its file and line."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    branch_ids: dict[str, str] = {}
    scripts: dict[str, list[str]] = {}
    try:
        loaded = load_config(repo)
        warnings.extend(loaded.warnings)
        branch_ids = branch_check_ids(loaded.config.branch_checks)
        scripts = BranchGate(branch_checks_of(loaded.config)).scripts
        if not loaded.config.branch_checks and (repo / config_path()).is_file():
            warnings.append(_no_branch_checks(repo))
    except InputError as error:
        problems.extend(error.problems)
    inputs = committed_inputs(repo)
    intent_files, misnamed = _intent_files(inputs)
    problems.extend(
        Problem(relative, None, f"file name must be <task_id>{INTENT_SUFFIX} with a valid id")
        for relative in misnamed
    )
    read = refuse_branch_check_ids(
        inputs, read_intents(inputs, intent_files), branch_ids, config_path()
    )
    for file in read.values():
        problems.extend(file.problems)
    slugs = [name.removesuffix(".md") for name in inputs.names_in(INITIATIVES_DIR, ".md")]
    parsed: list[LocatedInitiative] = []
    for slug in slugs:
        try:
            located = read_local_initiative(inputs, slug)
        except InputError as error:
            problems.extend(error.problems)
            continue
        parsed.append(located)
        problems.extend(_missing_intents(located, set(intent_files)))
        warnings.extend(_scope_conflicts(inputs, located, read, scripts))
    intents = len(intent_files) + len(misnamed)
    return Validation(problems, warnings, len(slugs), intents, tuple(parsed))


def _intent_files(inputs: CommittedInputs) -> tuple[list[str], list[str]]:
    """Task ids of the committed intent files, and the paths of misnamed ones."""
    task_ids: list[str] = []
    misnamed: list[str] = []
    for name in inputs.names_in(PLANS_DIR, INTENT_SUFFIX):
        task_id = name.removesuffix(INTENT_SUFFIX)
        if is_identifier(task_id):
            task_ids.append(task_id)
        else:
            misnamed.append(f"{PLANS_DIR}/{name}")
    return task_ids, misnamed


def _missing_intents(located: LocatedInitiative, have: set[str]) -> list[Problem]:
    return [
        located.locations[task.task_id].problem(
            f"Task {task.task_id} has no intent: create {intent_path(task.task_id)}"
        )
        for task in located.initiative.tasks
        if task.task_id not in have
    ]


def _scope_conflicts(
    inputs: CommittedInputs,
    located: LocatedInitiative,
    read: Mapping[str, IntentFile],
    scripts: Mapping[str, Sequence[str]],
) -> list[Problem]:
    """Each task of the initiative whose scope covers a path another task's check names where
    the plan's order does not let it change the path, or a file a branch check runs (`scripts`,
    which no lane may change), at its intent's `scope_hint` line (issue 42 #3, issue 58):
    found before a lane runs, not after. A covering task the plan orders first is told
    nothing: it may build what the later task tests."""
    intents = {
        task.task_id: reading.intent
        for task in located.initiative.tasks
        if task.task_id in read and isinstance(reading := read[task.task_id].reading, ValidIntent)
    }
    scopes = {task: tuple(intent.scope_hint) for task, intent in intents.items()}
    said = [(found.task, found.message()) for found in scope_plan_conflicts(scopes, scripts)]
    conflicts = intent_conflicts(intents)
    dependencies = {task.task_id: task.blocked_by for task in located.initiative.tasks}
    with contextlib.suppress(CycleError):  # a cycle is the initiative's own problem
        ancestors = ordered_ancestors(dependencies, conflicts) if conflicts else {}
        said += [(c.task, text) for c, text in cover_warnings(conflicts, ancestors)]
    found = []
    for task, text in said:
        relative = intent_path(task)
        data = inputs.read(relative)
        body = data.decode("utf-8", "replace") if data is not None else ""
        found.append(Problem(relative, locate_json_path(body, ("scope_hint",)), text))
    return found


def _relevant_paths(repo: Path, base: str, initiatives: tuple[LocatedInitiative, ...]) -> set[str]:
    """Changed files, plus the initiatives whose tasks' intents changed."""
    changed = changed_paths(repo, base)
    relevant = set(changed)
    for located in initiatives:
        if any(intent_path(task.task_id) in changed for task in located.initiative.tasks):
            relevant.add(initiative_path(located.initiative.slug))
    return relevant
