"""Running one descriptor command the deterministic way (SPEC §4.3).

No shell; its own session under a reaper (contain.py); the environment replaced by PATH and a
fresh HOME/TMPDIR/XDG_CACHE_HOME (so no token of the caller's can leak); the whole process tree
killed on timeout, when the output passes its cap, and when the command ends; and files of the
tree under test outside `writable_paths` must be left as they were.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from imm_action.ledger.read import run_ledger
from imm_action.model.descriptor import DescriptorCommand, VerificationDescriptor
from imm_action.model.ledger import named_tests
from imm_action.model.outcome import OUTPUT_TAIL_BYTES, CheckResult
from imm_action.sandbox.confine import (
    NOT_CONFINED,
    Bind,
    Confined,
    Confinement,
    Mount,
    NetworkAccess,
    Overlay,
    inside,
)
from imm_action.sandbox.contain import end, start_contained
from imm_action.sandbox.proxy import CommandReach, NetworkReach, refusal_lines
from imm_action.sandbox.toolchains import QUIET, populate_home
from imm_action.sandbox.view import within
from imm_action.verify.tests_alone import alone_environment, ran_alone
from imm_action.verify.trees import remove_tree

_READ_CHUNK = 65536

FileStamp = tuple[int, int, int]  # mode, size, mtime_ns


@dataclass(frozen=True)
class Sandbox:
    """A materialised tree, the private home its commands get, and the sandbox they run in."""

    root: Path
    home: Path
    path_env: str  # the PATH commands may look tools up on
    # Tracked files changed outside the writable folders, when git's own stat data can tell
    # (a checkout with its own index, trees.py); else the tree is walked before and after.
    changes: Callable[[tuple[str, ...]], list[str]] | None = None
    confinement: Confinement = NOT_CONFINED  # the sandbox (confine.py); inactive: a reaper
    extra: tuple[tuple[str, str], ...] = ()  # more variables (setup's network settings)
    binds: tuple[Bind, ...] = ()  # more paths seen inside (setup's home and tree, read-only)
    network: NetworkAccess = True
    # an overlay tree (overlays.py): mounted at `seen_at` in place of `root`, whose files are
    # nowhere on the host; what a path of it is (`dir`, `file`, `exec`, `link`, None) is read
    # from its git tree
    overlay: Overlay | None = None
    entry_kind: Callable[[str], str | None] | None = None
    # more of the host shown read-only inside `home`: (source, relative) — what `check_setup`
    # left in its home, seen in each check's own
    home_binds: tuple[tuple[str, str], ...] = ()
    # where `home` is seen inside the sandbox (None: at its own path): setup's, at one path
    # everywhere, so what it installs there names no path of this runner (issue 62 #6)
    home_at: str | None = None
    # a list's hosts for its commands, through the run's proxy (issue 60); None: `network`
    reach: NetworkReach | None = None
    log: Callable[[str], None] | None = None  # where what the list refused is told, with when

    def reaching(self) -> AbstractContextManager[CommandReach]:
        """One command's network while it runs, and what the list refused it after."""
        if self.reach is None:
            return contextlib.nullcontext(CommandReach(self.network))
        return self.reach.command()

    @property
    def seen_at(self) -> str | None:
        """Where the tree is seen inside the sandbox; None: at its own path."""
        return self.confinement.tree_at if self.confinement.active else None

    def environment(self) -> dict[str, str]:
        tmp = self.home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        (self.home / ".cache").mkdir(parents=True, exist_ok=True)
        toolchains = self.confinement.toolchains
        in_home = (*self.home_binds, *self.confinement.home_binds())
        populate_home(self.home, in_home, toolchains.files, confined=self.confinement.active)
        home = self._home_seen
        return {
            "PATH": self.path_env,
            "HOME": home,
            # in the sandbox, /tmp is the command's own (nothing it leaves there outlives it)
            "TMPDIR": "/tmp" if self.confinement.active else str(tmp),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            **dict(QUIET),
            **dict(toolchains.variables),
            **dict(self.extra),
        }

    def confined(self, cwd: Path) -> Confined:
        """The command's place in the sandbox: its tree writable at `seen_at`, its home
        writable, `binds` as given, what its home shows of the host read-only."""
        tree: Mount = (
            Bind(self.root, self.seen_at or str(self.root), writable=True)
            if self.overlay is None
            else self.overlay
        )
        binds = (
            tree,
            Bind(self.home, self._home_seen, writable=True),
            *self.binds,
            *self.confinement.own_home_binds(self.home, self.home_binds, self._home_seen),
        )
        return Confined(self.confinement, binds, inside(cwd, self.root, self.seen_at),
                        network=self.network)  # fmt: skip

    @property
    def _home_seen(self) -> str:
        return self.home_at if self.home_at and self.confinement.active else str(self.home)


def run_command(
    sandbox: Sandbox, check_id: str, command: DescriptorCommand, writable: tuple[str, ...]
) -> CheckResult:
    return _run(sandbox, check_id, command, writable)[0]


def run_check(
    sandbox: Sandbox,
    check_id: str,
    descriptor: VerificationDescriptor,
    writable: tuple[str, ...],
    alone: frozenset[str] = frozenset(),
) -> CheckResult:
    """A check's run, with the tests it reported (issue 58): pytest writes JUnit XML where
    PYTEST_ADDOPTS says, any runner may write a report to $IMM_TEST_REPORT, the descriptor
    may name the file its runner writes (`report`), and TAP in the output counts too.
    `alone`: tests to run alone where the runner can (tests_alone.py; `ran_only` says so)."""
    folder = sandbox.home / TESTS_FOLDER
    remove_tree(folder)
    folder.mkdir(parents=True)
    in_tree = _report_place(sandbox, descriptor.report)
    before = _stamp(in_tree)
    asked = ledger_environment(folder)
    if alone:  # (a later variable of `extra` wins: its PYTEST_ADDOPTS holds the report's too)
        asked = (*asked, *alone_environment(folder, alone, dict(asked)["PYTEST_ADDOPTS"]))
    ran, output = _run(replace(sandbox, extra=(*sandbox.extra, *asked)),
                       check_id, descriptor.command, writable)  # fmt: skip
    if alone and ran_alone(folder):
        ran = ran.model_copy(update={"ran_only": named_tests(sorted(alone))})
    reports = [(folder, PYTEST_REPORT), (folder, ANY_REPORT)]
    if in_tree is not None and _stamp(in_tree) != before:  # written by this run
        reports.append(in_tree)
    roots = [str(sandbox.root), *([sandbox.seen_at] if sandbox.seen_at else [])]
    ledger = run_ledger(reports, output.decode("utf-8", "replace"), roots)
    if ledger is None:
        return ran
    return ran.model_copy(update={"tests": ledger, "failed_tests": named_tests(ledger.failing())})


TESTS_FOLDER = "imm-tests"  # in a check's own home: the reports imm asks for
PYTEST_REPORT = "pytest.xml"
ANY_REPORT = "report"


def ledger_environment(folder: Path) -> tuple[tuple[str, str], ...]:
    """What asks a check's runner for its report: pytest through PYTEST_ADDOPTS (a script
    that runs pytest reports too; xunit1 names each test's file, so ids are node ids), any
    runner through IMM_TEST_REPORT."""
    junit = shlex.quote(f"--junitxml={folder / PYTEST_REPORT}")
    return (
        ("PYTEST_ADDOPTS", f"{junit} -o junit_family=xunit1"),
        ("IMM_TEST_REPORT", str(folder / ANY_REPORT)),
    )


def _report_place(sandbox: Sandbox, report: str | None) -> tuple[Path, str] | None:
    """Where a report the descriptor names lies on the host once the check wrote it: in an
    overlay's upper folder (what the run wrote), or in the checkout."""
    if report is None:
        return None
    return (sandbox.overlay.upper if sandbox.overlay is not None else sandbox.root), report


def _stamp(place: tuple[Path, str] | None) -> tuple[int, int, int] | None:
    if place is None:
        return None
    try:
        status = os.lstat(place[0] / place[1])
    except OSError:
        return None
    return status.st_ino, status.st_size, status.st_mtime_ns


def _run(
    sandbox: Sandbox, check_id: str, command: DescriptorCommand, writable: tuple[str, ...]
) -> tuple[CheckResult, bytes]:
    """The command's result, and all it printed (up to its output limit)."""
    started = time.monotonic()
    try:
        argv, cwd = _resolve(sandbox, command)
    except _CannotRun as refusal:
        return _refused(check_id, str(refusal)), b""
    before = snapshot(sandbox.root, writable) if sandbox.changes is None else {}
    with sandbox.reaching() as reach:  # its network: the host's, none, or a list's
        exit_code, output, timed_out, limited = _execute(
            argv, cwd, replace(sandbox, network=reach.network), command
        )
    if sandbox.log is not None and sandbox.reach is not None:
        for line in refusal_lines(sandbox.reach.key, reach.refused):
            sandbox.log(f"{check_id}: {line}")
    if sandbox.changes is None:
        changed = changed_paths(before, snapshot(sandbox.root, writable))
    else:
        changed = sandbox.changes(writable)
    duration = int((time.monotonic() - started) * 1000)
    result = CheckResult(
        check_id=check_id,
        passed=exit_code == 0 and not timed_out and not limited and not changed,
        exit_code=exit_code,
        duration_ms=duration,
        timed_out=timed_out,
        output_limited=limited,
        changed_outside=changed,
        output_tail=output[-OUTPUT_TAIL_BYTES:].decode("utf-8", "replace"),
        blocked_hosts=reach.blocked,  # what the network list refused it (issue 60)
    )
    return result, output


class _CannotRun(Exception):
    pass


def _resolve(sandbox: Sandbox, command: DescriptorCommand) -> tuple[list[str], Path]:
    if sandbox.entry_kind is not None:
        return _resolve_in_tree(sandbox, sandbox.entry_kind, command)
    root = sandbox.root.resolve()
    cwd = (root / command.cwd).resolve()
    if not cwd.is_relative_to(root) or not cwd.is_dir():
        raise _CannotRun(f"cwd {command.cwd!r} is not a folder of the tree under test")
    if command.executable.startswith("./"):
        executable = (root / command.executable[2:]).resolve()
        if not executable.is_relative_to(root) or not executable.is_file():
            raise _CannotRun(f"{command.executable} is not a file of the tree under test")
        found = executable
    else:
        found = _located(sandbox, command.executable, cwd)
    # in the sandbox, a program of the tree is seen where the tree is
    shown = inside(found, root, sandbox.seen_at) if found.is_relative_to(root) else str(found)
    return [shown, *command.argv], cwd


def _resolve_in_tree(
    sandbox: Sandbox, kind: Callable[[str], str | None], command: DescriptorCommand
) -> tuple[list[str], Path]:
    """`_resolve` for a tree whose files are only seen inside the sandbox (an overlay): paths
    are taken as written (a link on the way is not followed) and looked up in its git tree."""
    place = _within_tree(command.cwd)
    if place is None or kind(place) != "dir":
        raise _CannotRun(f"cwd {command.cwd!r} is not a folder of the tree under test")
    cwd = sandbox.root / place
    if command.executable.startswith("./"):
        program = _within_tree(command.executable[2:])
        if program is None or kind(program) not in ("file", "exec", "link"):
            raise _CannotRun(f"{command.executable} is not a file of the tree under test")
        found = sandbox.root / program
    else:
        found = _located(sandbox, command.executable, cwd, (sandbox.root, kind))
    shown = (
        inside(found, sandbox.root, sandbox.seen_at)
        if found.is_relative_to(sandbox.root)
        else str(found)
    )
    return [shown, *command.argv], cwd


def _located(
    sandbox: Sandbox,
    name: str,
    cwd: Path,
    tree: tuple[Path, Callable[[str], str | None]] | None = None,
) -> Path:
    """`name` on the checks' PATH as the sandbox shows it: a program in a folder the sandbox
    hides (`$RUNNER_TEMP/bin`, a home's tool) is passed over, and refused with the folder
    named when it is the only one (issue 43 #5: bwrap said only `execvp: No such file`)."""
    located = which(name, sandbox.path_env, cwd, tree, visible=_seen_by(sandbox))
    if located is not None:
        return located
    anywhere = which(name, sandbox.path_env, cwd, tree)
    if anywhere is not None:
        folder = sandbox.confinement.hiding(str(anywhere)) or sandbox.confinement.hiding(
            os.path.realpath(anywhere)
        )
        raise _CannotRun(
            f"{name!r} is found on PATH only at {anywhere}, in {folder}, which the sandbox "
            "hides from lane code; name it in `sandbox_expose` in .github/imm.yml to show it "
            "read-only, or install it with `check_setup` (docs/formats.md)"
        )
    raise _CannotRun(
        f"{name!r} was not found on PATH; `check_setup` in "
        ".github/imm.yml prepares what checks run with (docs/first-initiative.md)"
    )


def _seen_by(sandbox: Sandbox) -> Callable[[Path], bool]:
    """Whether a program at a host path is there for the sandboxed command: its tree, what is
    bound in for it (setup's home), or what the sandbox shows of the host."""
    confinement = sandbox.confinement
    if not confinement.active:
        return lambda path: True
    shown = [str(sandbox.root), *(str(bind.source) for bind in sandbox.binds
                                  if str(bind.source) == bind.target)]  # fmt: skip

    def seen(path: Path) -> bool:
        for place in (str(path), os.path.realpath(path)):
            if not any(within(place, folder) for folder in shown) and confinement.hiding(place):
                return False
        return True

    return seen


def _within_tree(relative: str) -> str | None:
    """`relative` normalised, or None when it leaves the tree."""
    normal = os.path.normpath(relative)
    if os.path.isabs(normal) or normal == ".." or normal.startswith("../"):
        return None
    return normal


def which(
    name: str,
    path_env: str,
    cwd: Path,
    tree: tuple[Path, Callable[[str], str | None]] | None = None,
    *,
    visible: Callable[[Path], bool] = lambda path: True,
) -> Path | None:
    """`name` on `path_env` as a shell in `cwd` would find it: a relative or empty entry is
    relative to `cwd` (the command's folder), never to imm's own. `tree`: a tree seen only in
    the sandbox (its root, and what a path of it is), where a folder under that root is
    looked up. `visible`: whether the command would see a program found on the host."""
    for entry in path_env.split(os.pathsep):
        folder = Path(entry) if os.path.isabs(entry) else cwd / entry
        candidate = folder / name
        normal = Path(os.path.normpath(candidate))
        if tree is not None and normal.is_relative_to(tree[0]):
            if tree[1](str(normal.relative_to(tree[0]))) in ("exec", "link"):
                return normal
            continue
        executable = candidate.is_file() and os.access(candidate, os.X_OK)
        if executable and visible(candidate.absolute()):
            return candidate.absolute()
    return None


def _execute(
    argv: list[str], cwd: Path, sandbox: Sandbox, command: DescriptorCommand
) -> tuple[int | None, bytes, bool, bool]:
    try:
        # under a reaper in a session of its own: ending it ends every process it started,
        # `setsid` daemons included (contain.py)
        process = start_contained(
            # an overlay's folders exist only inside: the sandbox starts there (`--chdir`)
            argv, cwd=cwd if sandbox.overlay is None else sandbox.root, env=sandbox.environment(),
            stdout=subprocess.PIPE, confined=sandbox.confined(cwd),
        )  # fmt: skip
    except OSError as error:
        return None, f"cannot start {argv[0]}: {error}".encode(), False, False
    if process.stdout is None:  # started with stdout=PIPE: never None
        raise OSError(f"{argv[0]} started without an output pipe")
    deadline = time.monotonic() + command.timeout_ms / 1000
    try:
        output, timed_out, limited = _collect(process, deadline, command.max_output_bytes)
    finally:
        exit_code = end(process)
        process.stdout.close()
    return (None if timed_out else exit_code), output, timed_out, limited


def _collect(
    process: subprocess.Popen[bytes], deadline: float, cap: int
) -> tuple[bytes, bool, bool]:
    if process.stdout is None:
        raise OSError("the check has no output pipe")
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"".join(chunks), True, False
            if not selector.select(timeout=min(remaining, 0.2)):
                if process.poll() is not None:
                    # the command is done; a child of it still holds the pipe open
                    return b"".join(chunks), False, False
                continue
            chunk = os.read(process.stdout.fileno(), _READ_CHUNK)
            if not chunk:
                return b"".join(chunks), False, False
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                return b"".join(chunks)[:cap], False, True


def _refused(check_id: str, why: str) -> CheckResult:
    return CheckResult(
        check_id=check_id,
        passed=False,
        exit_code=None,
        duration_ms=0,
        timed_out=False,
        output_limited=False,
        changed_outside=[],
        output_tail="",
        error=why,
    )


def snapshot(root: Path, writable: tuple[str, ...]) -> dict[str, FileStamp]:
    """Stamps of every file and link outside the writable folders."""
    stamps: dict[str, FileStamp] = {}
    skip = {os.path.normpath(os.path.join(root, folder)) for folder in writable}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skip]
        for name in files:
            path = os.path.join(folder, name)
            status = os.lstat(path)
            stamps[os.path.relpath(path, root)] = (
                status.st_mode,
                status.st_size,
                status.st_mtime_ns,
            )
    return stamps


def changed_paths(before: dict[str, FileStamp], after: dict[str, FileStamp]) -> list[str]:
    """Files of the tree that a check modified or removed. New files (caches such as
    `__pycache__`) are not changes to the tree under test, so they are allowed."""
    return sorted(path for path, stamp in before.items() if after.get(path) != stamp)
