"""The repository paths a task's checks name, who may change them, and the order that lets them
(pure; issue 42 #2, issue 58).

A check runs a file or names one as its users write it (`python3 tests/test_c.py`, `pytest
tests/c`, `pytest tests/test_c.py::T`, `python3 -m unittest tests.test_c`): that path — and what
lies below it, when it is a folder — belongs to the task whose check names it (its *owner*).
The owner and the tasks ordered before it (its ancestors) may create and change it; once the
owner has landed, no other lane may change or remove a file its check names, while a new file
below a named folder is judged by the test ledger, not refused (`plan/lane_change.py`). Where a
task's scope covers another task's named path and nothing orders the two, the plan orders them
(`check_orders`): the covering task first, so a lane bound to be refused never runs."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from imm_action.model.descriptor import DescriptorCommand, DescriptorError, parse_descriptor
from imm_action.model.intent import TaskIntent
from imm_action.plan.dag import kahn_order, transitive_closures
from imm_action.plan.scope import ScopeIndex, scope_prefix, scope_prefixes, scopes_overlap

SCOPE_COVERS_CHECK = "scope_covers_check"

# -- the forms a check names a path in (issue 58 #3) -------------------------------------------
# The runners whose arguments name tests by dotted module (`tests.test_c`, `tests.test_c.T`).
_DOTTED_RUNNERS = frozenset({"unittest", "pytest", "nose2"})
# Programs that are a test runner themselves, and the module name each stands for.
_RUNNER_PROGRAMS = {"pytest": "pytest", "py.test": "pytest", "nose2": "nose2"}
# Options whose next argument is a value, never a path: per program or module (`python` for the
# interpreter before `-m`), so `-k 'not slow'` or `-n 4` is not read as a file.
_VALUE_OPTIONS: Mapping[str, frozenset[str]] = {
    "python": frozenset({"-W", "-X", "-Q"}),
    "pytest": frozenset({"-k", "-m", "-p", "-o", "-n", "-W", "-r", "--tb", "--maxfail",
                         "--durations", "--deselect", "--log-level", "--color", "--dist",
                         "--import-mode", "--capture", "--override-ini", "--junit-prefix", "--cov",
                         "--cov-report", "--cov-fail-under"}),
    "unittest": frozenset({"-k", "-p", "--pattern"}),
    "nose2": frozenset({"-A", "-E", "-k", "-p", "--pattern", "--log-level"}),
    "node": frozenset({"--require", "-r", "--import", "--loader", "--test-reporter",
                       "--test-name-pattern", "--test-reporter-destination", "--conditions",
                       "--test-concurrency", "--test-timeout", "--test-shard"}),
}  # fmt: skip
# Options whose next argument is a path: unittest's and nose2's start and top folders,
# pytest's config file and root.
_FOLDERS = frozenset({"-s", "--start-directory", "-t", "--top-level-directory"})
_PATH_OPTIONS: Mapping[str, frozenset[str]] = {
    "unittest": _FOLDERS,
    "nose2": _FOLDERS | {"-c", "--config"},
    "pytest": frozenset({"-c", "--config-file", "--rootdir", "--confcutdir", "--ignore"}),
}
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_FILE_ENDING = re.compile(r"\.[A-Za-z0-9]{1,5}$")
_GLOB = re.compile(r"[*?\[\]{}!]")


def named_paths(command: DescriptorCommand) -> list[str]:
    """What a descriptor's command names as repository paths, as repository paths, in the forms
    its users write them: its `./` executable; each argument read from its cwd — a pytest node
    id as its file (`a.py::T::t` -> `a.py`), a dotted module after `-m unittest`, `-m pytest`
    or `-m nose2` as its file and its package (`a.b` -> `a/b.py`, `a/b`), a glob as the folder
    before its first wildcard, `--opt=value` as `value` where it reads as a path (a `/` or a
    file ending), the folders of `unittest discover`; never an option, an option's value, a
    module `-m` runs, or the code of `-c`."""
    folder = "" if command.cwd == "." else command.cwd
    found = [command.executable[2:]] if command.executable.startswith("./") else []
    found += _ArgumentReader(command.executable.rsplit("/", 1)[-1]).paths(list(command.argv))
    joined = (_joined(folder, path) for path in found)
    return list(dict.fromkeys(path for path in joined if path is not None))


class _ArgumentReader:
    """Reads a command's arguments in the context each stands in: the interpreter's options
    before `-m`, then the runner's (pytest's `-m` is a marker, not a module)."""

    def __init__(self, program: str) -> None:
        self.runner = _RUNNER_PROGRAMS.get(program)
        self.context = self.runner or ("node" if program.startswith("node") else "python")
        self.discover: int | None = None  # positionals met after `unittest discover`

    def paths(self, arguments: list[str]) -> list[str]:
        found: list[str] = []
        position = 0
        while position < len(arguments):
            argument = arguments[position]
            following = arguments[position + 1] if position + 1 < len(arguments) else None
            position += 1
            if self.runner is None and self.context == "python" and argument in ("-m", "-c"):
                if argument == "-m" and following is not None:
                    self.runner = following if following in _DOTTED_RUNNERS else None
                    self.context = following
                position += 1  # the module's name, or the code of `-c`: no path
            elif argument.startswith("-"):
                named, took_next = self._option(argument, following)
                found += named
                position += took_next
            elif not self._discover_pattern(argument):
                found += _argument_paths(argument, self.runner)
        return found

    def _option(self, argument: str, following: str | None) -> tuple[list[str], int]:
        """The paths an option names, and whether it took the next argument as its value."""
        values = _VALUE_OPTIONS.get(self.context, frozenset())
        paths = _PATH_OPTIONS.get(self.context, frozenset())
        option, equals, value = argument.partition("=")
        if equals:
            if option not in values and (option in paths or _reads_as_path(value)):
                return _argument_paths(value, None), 0
            return [], 0
        if argument in values:
            return [], 1
        if argument in paths and following is not None:
            return _argument_paths(following, None), 1
        return [], 0

    def _discover_pattern(self, argument: str) -> bool:
        """`unittest discover START PATTERN TOP`: `discover` itself and the file pattern name
        no path; the start and top folders do."""
        if self.runner == "unittest" and argument == "discover" and self.discover is None:
            self.discover = 0
            return True
        if self.discover is None:
            return False
        self.discover += 1
        return self.discover == 2


def _reads_as_path(value: str) -> bool:
    return "/" in value or _FILE_ENDING.search(value) is not None


def _argument_paths(argument: str, runner: str | None) -> list[str]:
    """The paths one argument names (before joining it to the check's folder)."""
    if argument.startswith("/") or not argument:
        return []  # a path outside the tree
    path = argument.split("::", 1)[0]  # a pytest node id: its file
    module = path.split(":", 1)[0]  # nose's `a.b:Class.test`
    if runner in _DOTTED_RUNNERS and _DOTTED.fullmatch(module) and not module.endswith(".py"):
        dotted = "/".join(_module_parts(module))
        return [*([path] if runner == "pytest" else []), f"{dotted}.py", dotted]
    wildcard = _GLOB.search(path)
    if wildcard is not None:  # a glob: the folder before its first wildcard
        path = path[: path.rfind("/", 0, wildcard.start()) + 1]
    return [path]


def _module_parts(dotted: str) -> list[str]:
    """A dotted test name's module, without the class and method that follow it: the segments
    before the first one that starts with a capital (`tests.test_c.TestC.test_x`)."""
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if index and part[:1].isupper():
            return parts[:index]
    return parts


def _joined(folder: str, relative: str) -> str | None:
    """`folder/relative` normalised, or None when it leaves the repository or enters .git."""
    parts: list[str] = []
    for part in [*folder.split("/"), *relative.split("/")]:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    if not parts or ".git" in parts:
        return None  # the repository's root (`pytest .`) is no task's: it holds every path
    return "/".join(parts)


def intent_commands(intent: TaskIntent) -> list[DescriptorCommand]:
    """The commands of an intent's acceptance checks (a descriptor that does not parse names
    nothing: `imm check` reports it on its own)."""
    found: list[DescriptorCommand] = []
    for item in intent.acceptance:
        try:
            found.append(parse_descriptor(item.verification).command)
        except DescriptorError:
            continue
    return found


def paths_named_by(intents: Mapping[str, TaskIntent]) -> tuple[dict[str, set[str]], set[str]]:
    """path -> the tasks whose checks name it; and the paths among them a check runs itself
    (its script: never changed but by its owner, whatever the order)."""
    named: dict[str, set[str]] = {}
    run: set[str] = set()
    for task, intent in intents.items():
        for command in intent_commands(intent):
            for path in named_paths(command):
                named.setdefault(path, set()).add(task)
            run.update(run_scripts(command))
    return named, run


# -- scopes that cover another task's named path ------------------------------------------------
@dataclass(frozen=True, order=True)
class ScopeCoversCheck:
    """`task`'s scope covers `path`, which `owner`'s check names (`runs`: runs it itself, a
    script only its owner may change)."""

    task: str
    path: str
    owner: str
    runs: bool = False

    def message(self) -> str:
        return (
            f"{SCOPE_COVERS_CHECK}: {self.task} may change {self.path}, named by "
            f"{self.owner}'s check; a lane of {self.task} that changes it is refused "
            f"(lane_touches_check) — narrow {self.task}'s scope_hint to leave {self.path} out, "
            f"or make {self.owner}'s check not name it"
        )

    def after_owner_message(self) -> str:
        """The warning where `task` runs after `owner`: it may add files below a named folder,
        never change what the owner's landed check runs."""
        return (
            f"{SCOPE_COVERS_CHECK}: {self.task} runs after {self.owner}, whose check names "
            f"{self.path}; once {self.owner} has landed a lane of {self.task} may not change or "
            f"remove it (lane_touches_check) — narrow {self.task}'s scope_hint to leave "
            f"{self.path} out, or retire the tests it means to change in its intent "
            "(`retires_tests`) and name them in its own check"
        )


def scope_check_conflicts(
    scopes: Mapping[str, Sequence[str]],
    named: Mapping[str, Collection[str]],
    run: Collection[str] = (),
) -> list[ScopeCoversCheck]:
    """Every (task, path, owner) where `task`'s scope may change `path` (or what lies below it)
    and `owner`'s check names it, `owner` another task. `named`: path -> the tasks whose checks
    name it; `run`: the paths a check runs itself. A trie of the scopes answers each path, so
    10,000 tasks cost no pairwise comparison."""
    tasks = list(scopes)
    index = ScopeIndex()
    for position, task in enumerate(tasks):
        if scopes[task]:
            index.add(position, scope_prefixes(scopes[task]))
    found: list[ScopeCoversCheck] = []
    for path, owners in named.items():
        covering = {tasks[position] for position in index.overlapping([scope_prefix(path)])}
        for task in sorted(covering):
            if not scopes_overlap(scopes[task], [path, f"{path}/**"]):
                continue
            runs = path in run
            # a co-owner too: its own check names the path, another's as well
            found.extend(ScopeCoversCheck(task, path, owner, runs)
                         for owner in sorted(owners) if owner != task)  # fmt: skip
    return sorted(found)


def intent_conflicts(intents: Mapping[str, TaskIntent]) -> list[ScopeCoversCheck]:
    """`scope_check_conflicts` of the tasks' intents: their scope hints, and the paths their
    acceptance checks name."""
    scopes = {task: tuple(intent.scope_hint) for task, intent in intents.items()}
    named, run = paths_named_by(intents)
    return scope_check_conflicts(scopes, named, run)


# -- the order ownership needs ----------------------------------------------------------------
@dataclass(frozen=True, order=True)
class CheckOrder:
    """`owner` runs after `task`: `task`'s scope covers `path`, which `owner`'s check names, and
    nothing ordered the two (issue 58: the upstream task that builds what a later task tests)."""

    owner: str
    task: str
    path: str


def check_orders(
    plan_order: Sequence[str],
    ancestors: Mapping[str, Collection[str]],
    conflicts: Sequence[ScopeCoversCheck],
) -> tuple[CheckOrder, ...]:
    """The orders to add so that every task whose scope covers another's named path runs before
    it or after it (never beside it), given each task's ancestors. A pair already ordered keeps
    its order; an unordered one gets the covering task first; a pair that covers each other's
    paths is ordered by the first conflict met in plan order. Adding an edge only between
    unordered tasks never closes a cycle."""
    position = {task: index for index, task in enumerate(plan_order)}
    before: dict[str, set[str]] = {task: set(ancestors.get(task, ())) for task in plan_order}
    after: dict[str, set[str]] = {task: set() for task in plan_order}
    for task, found in before.items():
        for ancestor in found:
            after.setdefault(ancestor, set()).add(task)
    ranked = sorted(  # a script a check runs is its owner's alone: no order helps
        (c for c in conflicts if c.task in position and c.owner in position and not c.runs),
        key=lambda c: (position[c.owner], position[c.task], c.path),
    )
    orders: list[CheckOrder] = []
    for conflict in ranked:
        task, owner = conflict.task, conflict.owner
        if task in before[owner] or owner in before[task]:
            continue  # ordered already: before the owner it may change the path, after not
        orders.append(CheckOrder(owner, task, conflict.path))
        # the owner and everything after it now come after the task and what precedes it
        earlier = {task, *before[task]}
        for later in {owner, *after[owner]}:
            before[later] |= earlier
        for first in earlier:
            after.setdefault(first, set()).update({owner, *after[owner]})
    return tuple(orders)


def ordered_ancestors(
    dependencies: Mapping[str, Sequence[str]], conflicts: Sequence[ScopeCoversCheck]
) -> dict[str, frozenset[str]]:
    """Each task's ancestors once the orders ownership needs are added (as `imm plan` makes
    them; `dependencies` must form no cycle)."""
    closures = transitive_closures(kahn_order(dependencies), dependencies)
    orders = check_orders(list(closures), closures, conflicts)
    return ancestors_with(closures, runs_after(orders))


def runs_after(orders: Sequence[CheckOrder]) -> dict[str, list[str]]:
    """Each task the orders put after others, with those others."""
    found: dict[str, list[str]] = {}
    for order in orders:
        found.setdefault(order.owner, []).append(order.task)
    return found


def ancestors_with(
    closures: Mapping[str, Collection[str]], after: Mapping[str, Collection[str]]
) -> dict[str, frozenset[str]]:
    """Each task's ancestors through its dependencies (`closures`) and the tasks the plan's
    orders put before it (`after`): the tasks that run before it."""
    if not any(after.values()):
        return {task: frozenset(found) for task, found in closures.items()}
    extended = {task: [*found] for task, found in closures.items()}
    for task, firsts in after.items():
        extended.setdefault(task, []).extend(firsts)
        for first in firsts:
            extended.setdefault(first, [])
    closed = transitive_closures(kahn_order(extended), extended)
    return {task: frozenset(found) for task, found in closed.items()}


def cover_warnings(
    conflicts: Sequence[ScopeCoversCheck], ancestors: Mapping[str, Collection[str]]
) -> list[tuple[ScopeCoversCheck, str]]:
    """What a person is told of scopes that cover another task's named path, once the plan has
    ordered them: nothing where the covering task runs first (it may change the path); where it
    runs after the owner, a warning for a named file (a new file below a named folder lands);
    where nothing orders them (a task left out of the plan), or the path is a script the
    owner's check runs (its owner's alone), the refusal that would come."""
    said: list[tuple[ScopeCoversCheck, str]] = []
    for conflict in conflicts:
        if conflict.runs:  # the script a check runs: refused to every other lane
            said.append((conflict, conflict.message()))
            continue
        if conflict.task in ancestors.get(conflict.owner, ()):
            continue
        if conflict.owner in ancestors.get(conflict.task, ()):
            if _FILE_ENDING.search(conflict.path.rsplit("/", 1)[-1]):
                said.append((conflict, conflict.after_owner_message()))
            continue
        said.append((conflict, conflict.message()))
    return said


# -- what a branch check runs -----------------------------------------------------------------
_INTERPRETERS = re.compile(r"(?:sh|bash|dash|zsh|ksh|python[\d.]*|node|ruby|perl|php|bun|deno)")


def run_scripts(command: DescriptorCommand) -> list[str]:
    """The repository files a command runs itself (never what it tests): its `./` executable,
    and the script an interpreter is given (`sh scripts/test.sh`, `python3 tools/check.py`) —
    not a module `-m` runs, the code of `-c`, or the paths a test runner is handed."""
    folder = "" if command.cwd == "." else command.cwd
    found = [command.executable[2:]] if command.executable.startswith("./") else []
    if _INTERPRETERS.fullmatch(command.executable.rsplit("/", 1)[-1]):
        for argument in command.argv:
            if argument in ("-m", "-c", "-e", "--eval", "-p", "--print"):
                break  # a module or code is run, not a file of the tree
            if not argument.startswith("-"):
                found.append(argument)
                break
    joined = (_joined(folder, path) for path in found)
    return list(dict.fromkeys(path for path in joined if path is not None))


@dataclass(frozen=True, order=True)
class ScopeCoversPlan:
    """`task`'s scope covers `path`, which a branch check (`check_id`) runs: no lane may change
    it (issue 58: a lane that rewrites `scripts/test.sh` to `exit 0` switches the suite off)."""

    task: str
    path: str
    check_id: str

    def message(self) -> str:
        return (
            f"scope_covers_plan: {self.task} may change {self.path}, which branch check "
            f"{self.check_id} runs; no lane may change it (lane_touches_plan) — narrow "
            f"{self.task}'s scope_hint to leave {self.path} out"
        )


def scope_plan_conflicts(
    scopes: Mapping[str, Sequence[str]], scripts: Mapping[str, Collection[str]]
) -> list[ScopeCoversPlan]:
    """Every task whose scope covers a file a branch check runs. `scripts`: path -> the branch
    checks that run it."""
    return sorted(
        ScopeCoversPlan(task, path, check_id)
        for path, checks in scripts.items()
        for task, scope in scopes.items()
        if scope and scopes_overlap(scope, [path])
        for check_id in checks
    )
