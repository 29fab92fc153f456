"""Which checks apply, read from the plan's intents (never from a tree a lane wrote; SPEC
§5.4): a candidate's and the held tasks' acceptance checks, every check by digest, the paths
the checks name (which only their own task may change) and the files the plan is read from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from imm_action.carriers.source import carrier_file
from imm_action.git.repo import GitRepo
from imm_action.integrate.facts import (
    ChecksFact,
    ChecksFound,
    ChecksMissing,
)
from imm_action.integrate.judgement import held_tasks
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.intent import TaskIntent, intent_path
from imm_action.model.state import BatchRunState
from imm_action.plan.check_paths import ancestors_with, named_paths, run_scripts
from imm_action.plan.lane_change import NamedPath
from imm_action.verify.checks import Check

IntentChecks = tuple[Check, ...] | ChecksMissing


# (task, intent blob id) -> its acceptance checks, or why there are none: blobs never change
IntentMemo = dict[tuple[str, str], IntentChecks]


def held_checks(repo: GitRepo, state: BatchRunState, intents: IntentMemo) -> tuple[Check, ...]:
    """The checks of every task whose change the batch branch holds (this batch's and, in a
    continuation, the earlier batches'), read from the plan's intents."""
    found = owned_checks(repo, state.judged_at, held_tasks(state), intents)
    return found.checks if isinstance(found, ChecksFound) else ()


def checks_by_digest(
    repo: GitRepo, state: BatchRunState, more: Sequence[Check] = ()
) -> dict[str, Check]:
    """Every acceptance check of the batch's tasks, by descriptor digest, read from the plan's
    intents (a verify job's descriptors: never a candidate's tree), and `more` (the branch
    checks, read from the plan's config)."""
    intents: IntentMemo = {}
    found: dict[str, Check] = {check.digest: check for check in more}
    for child in state.children:
        checks = owned_checks(repo, state.judged_at, [child.task_id], intents)
        if isinstance(checks, ChecksFound):
            found.update((check.digest, check) for check in checks.checks)
    return found


_CHECK_FILES: dict[tuple[str, tuple[str, ...]], Mapping[str, NamedPath]] = {}


def check_files(
    repo: GitRepo, state: BatchRunState, intents: IntentMemo
) -> Mapping[str, NamedPath]:
    """The repository paths a task's check runs as its executable or names as an argument,
    each with the tasks whose checks name it and the tasks that may add, change or remove it
    — or anything below it, when it is a folder: each owner and the tasks the plan orders
    before it (issue 28 #5, issue 58). Whatever the path's state at the plan's commit (issue
    42 #2): the test a task's own lane writes in this batch is its task's too. Made once per
    plan commit: a pass asks for it on every round."""
    tasks = tuple(child.task_id for child in state.children)
    key = (state.judged_at, tasks)
    known = _CHECK_FILES.get(key)
    if known is not None:
        return known
    named: dict[str, set[str]] = {}
    run: set[str] = set()  # the scripts a check runs itself: its owners' alone
    for task in tasks:
        found = owned_checks(repo, state.judged_at, [task], intents)
        for check in found.checks if isinstance(found, ChecksFound) else ():
            for path in named_paths(check.descriptor.command):
                named.setdefault(path, set()).add(task)
            run.update(run_scripts(check.descriptor.command))
    before = state_ancestors(state)
    files = {
        path: NamedPath(
            frozenset(owners),
            frozenset(owners)
            if path in run
            else frozenset.intersection(*(before.get(o, frozenset()) | {o} for o in owners)),
        )
        for path, owners in named.items()
    }
    if len(_CHECK_FILES) > 64:
        _CHECK_FILES.clear()
    _CHECK_FILES[key] = files
    return files


def state_ancestors(state: BatchRunState) -> dict[str, frozenset[str]]:
    """Each child's ancestors: what it needs, and what the plan orders before it (`after`)."""
    closures = {child.task_id: child.blocked_by for child in state.children}
    return ancestors_with(closures, {c.task_id: c.after for c in state.children if c.after})


def plan_paths(state: BatchRunState, config_file: str) -> frozenset[str]:
    """The files what this batch is judged by comes from: its tasks' intents, its initiative
    (when a file carries it) and the repository config. No lane may change them."""
    paths = {intent_path(child.task_id) for child in state.children} | {config_file}
    carried_in = carrier_file(state.carrier)
    if carried_in is not None:
        paths.add(carried_in)
    return frozenset(paths)


def candidate_checks(
    repo: GitRepo,
    judged_at: str,
    *,
    task_id: str,
    below: Sequence[str],
    intents: IntentMemo | None = None,
) -> ChecksFact:
    """The descriptors a candidate must pass (SPEC §5.4): the child's acceptance plus that of
    every task whose change the tree below it holds (`below`: every integrated task and the
    lanes stacked under it — not only the siblings landed since its lane base, since a lane
    whose base holds a task can break it), read from the intents at `judged_at`, the commit
    the batch's plan was made from — never from the candidate, whose tree a lane wrote (a
    docs lane could weaken a sibling's check there; issue 21)."""
    found = owned_checks(repo, judged_at, [task_id, *below], intents)
    if isinstance(found, ChecksFound) and not found.checks:
        return ChecksMissing(None, "none")
    return found


def owned_checks(
    repo: GitRepo, judged_at: str, owners: Sequence[str], intents: IntentMemo | None
) -> ChecksFact:
    """The acceptance checks of `owners`, in order. The intents are found by blob id in one
    read of their folder and parsed once per blob (`intents`): the candidates of a chain, and
    the passes of a batch, share nearly all of their intent files."""
    memo: IntentMemo = {} if intents is None else intents
    folders: dict[str, Mapping[str, str]] = {}
    checks: list[Check] = []
    for owner in owners:
        folder, _, name = intent_path(owner).rpartition("/")
        if folder not in folders:
            folders[folder] = repo.folder_files(judged_at, folder) or {}
        blob = folders[folder].get(name)
        if blob is None:
            return ChecksMissing(owner, "absent")
        found = memo.get((owner, blob))
        if found is None:
            found = _intent_checks(owner, repo.read_blob(blob))
            memo[(owner, blob)] = found
        if isinstance(found, ChecksMissing):
            return found
        checks.extend(found)
    return ChecksFound(tuple(checks))


def _intent_checks(owner: str, body: bytes | None) -> IntentChecks:
    if body is None:  # a link, say: no intent
        return ChecksMissing(owner, "absent")
    try:
        intent = TaskIntent.model_validate_json(body.decode("utf-8", "surrogateescape"))
        return tuple(
            Check(f"{owner}:{item.id}", parse_descriptor(item.verification))
            for item in intent.acceptance
        )
    except (ValidationError, ValueError) as error:
        return ChecksMissing(owner, "unreadable", str(error))


_RETIRED: dict[str, tuple[str, ...]] = {}  # intent blob id -> what it retires (blobs never change)


def retired_tests(repo: GitRepo, judged_at: str, task_id: str) -> tuple[str, ...]:
    """The tests `task_id`'s intent at the plan's commit retires (`retires_tests`, issue 58):
    a candidate of its lane need not pass them again; () where it retires none."""
    folder, _, name = intent_path(task_id).rpartition("/")
    blob = (repo.folder_files(judged_at, folder) or {}).get(name)
    if blob is None:
        return ()
    known = _RETIRED.get(blob)
    if known is None:
        body = repo.read_blob(blob)
        try:
            intent = TaskIntent.model_validate_json((body or b"").decode("utf-8", "replace"))
            known = tuple(intent.retires_tests or ())
        except (ValidationError, ValueError):
            known = ()
        if len(_RETIRED) > 4096:
            _RETIRED.clear()
        _RETIRED[blob] = known
    return known
