"""`imm run <slug>`: run the whole batch here, with worktree lanes and live progress."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType

from imm_action.batches.output import print_report
from imm_action.batches.repo import (
    BatchRepo,
    config_warning_lines,
    executor_to_print,
    logs_folder,
    open_batch_repo,
    remember_executor,
    with_overrides,
)
from imm_action.console import CommandIO
from imm_action.errors import (
    EXIT_INTERRUPTED,
    EXIT_NEEDS_HUMAN,
    EXIT_OK,
    EXIT_TERMINATED,
    ImmError,
    UsageError,
)
from imm_action.integrate.store import StateStore
from imm_action.lanes.local import ForkedLane, LaneLauncher, LaneProcess, can_fork
from imm_action.local.coordinator import Coordinator, RunOptions
from imm_action.local.progress import PlainProgress, Progress
from imm_action.model.state import BatchState
from imm_action.ports import Ports
from imm_action.render import NextCommand
from imm_action.verify.editable import needs_check_setup_hint
from imm_action.workspace import uncommitted_note


@dataclass(frozen=True)
class RunArgs:
    slug: str
    repo: Path
    max_parallel: int | None
    executor: str | None
    batch_id: str | None
    json: bool
    environment: Mapping[str, str]
    fresh: bool = False
    max_children: int | None = None  # the budget of a batch this run starts
    max_cost_usd: float | None = None  # its cost budget (issue 45)


def run(args: RunArgs, ports: Ports) -> int:
    # the repository's git helpers (its `cat-file --batch`) end with the command, not with the
    # process: `run` is also called in-process, and a helper left to the collector is a leak
    with contextlib.ExitStack() as opened:
        return _run(args, ports, opened)


def _run(args: RunArgs, ports: Ports, opened: contextlib.ExitStack) -> int:
    io = ports.io
    # Signals are ours from the first line: a Ctrl-C or SIGTERM that comes while the batch is
    # still being opened ends the same way as one during the lanes, with the command to resume.
    coordinator: Coordinator | None = None
    batch_repo: BatchRepo | None = None
    progress: Progress | None = None
    try:
        with _sigterm_as_interrupt():
            batch_repo = with_overrides(
                open_batch_repo(args.repo, None, ports.initiatives),
                max_children=args.max_children,
                max_cost_usd=args.max_cost_usd,
            )
            opened.callback(batch_repo.repo.close)
            for line in config_warning_lines(batch_repo):
                io.warn(line)
            coordinator, progress = _coordinator(args, io, batch_repo)
            state = coordinator.run()
    except KeyboardInterrupt as stop:
        # Stop admitting, end the lanes (each ends its executor's whole process tree and
        # removes its folder); the state is already saved by the last pass.
        if coordinator is not None and progress is not None:
            with _signals_ignored():
                coordinator.interrupt()
            progress.close(coordinator.view)
        root = batch_repo.root if batch_repo is not None else args.repo
        executor = (
            executor_to_print(batch_repo, args.slug, args.executor)
            if batch_repo is not None
            else args.executor
        )
        again = NextCommand(("run", args.slug), None).local(io.program, root, executor)
        why = "terminated" if isinstance(stop, Terminated) else "interrupted"
        if coordinator is None or coordinator.state_commit is None:
            io.warn(f"imm run: {why} before the first pass ended; start it again with: {again}")
        else:
            io.warn(f"imm run: {why}; the batch is saved — resume it with: {again}")
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    progress.close(coordinator.view)
    stored = StateStore(batch_repo.refs).load(state.batch_id)
    if stored is None:
        raise ImmError(f"batch {state.batch_id} has no state ref after the run")
    integration = coordinator.view.integration_line()
    if integration is not None and not args.json:
        io.say(integration)
    print_report(
        stored, "json" if args.json else "text", io, batch_repo.root,
        executor_to_print(batch_repo, args.slug, args.executor), logs=logs_folder(batch_repo),
    )  # fmt: skip
    failures = [failure for child in stored.state.children for failure in child.failures]
    hint = needs_check_setup_hint(
        failures, batch_repo.root, args.environment, bool(batch_repo.config.check_setup)
    )
    if hint is not None:
        io.warn(f"imm run: {hint}")
    return EXIT_OK if stored.state.batch_state is BatchState.COMPLETED else EXIT_NEEDS_HUMAN


def _coordinator(
    args: RunArgs, io: CommandIO, batch_repo: BatchRepo
) -> tuple[Coordinator, Progress]:
    note = uncommitted_note(batch_repo.root)
    if note is not None:
        io.warn(note)
    executor = args.executor or batch_repo.config.executor
    if not executor:
        executor = executor_to_print(batch_repo, args.slug) or ""
        if executor:
            io.warn(f"imm run: the executor {args.slug} last ran with: {executor}")
    if not executor:
        raise UsageError("no executor: pass --executor CMD or set executor in .github/imm.yml")
    options = RunOptions(
        args.slug, executor, args.max_parallel, args.batch_id, args.environment, args.fresh
    )
    live = io.err.isatty() and not args.json
    progress: Progress = PlainProgress(io.err)
    if live:
        from imm_action.local.live import LiveProgress  # rich: imported on a terminal only

        progress = LiveProgress(io.err)
    given = args.executor

    def remember() -> None:  # once the inputs are planned: bad input leaves nothing behind
        if given:
            remember_executor(batch_repo, args.slug, given)

    launcher = _launcher(batch_repo, options)
    return Coordinator(batch_repo, options, progress, launcher, remember), progress


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C (a lane forked from `imm run` inherits the handler too)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """While the lanes are being ended, a second Ctrl-C or SIGTERM does not cut that short."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _launcher(batch_repo: BatchRepo, options: RunOptions) -> LaneLauncher:
    """`imm lane` for each admitted lane: forked from this process where the platform can (it
    starts in milliseconds), else a fresh interpreter."""

    if can_fork():  # found once here, so that no forked lane asks git again
        batch_repo.repo.git_directory()
        batch_repo.repo.common_directory()
        batch_repo.repo.objects_directory()
        # imported once here, not again in every forked lane (~12 ms on a lane's start)
        from imm_action.commands import lane  # noqa: F401

    def launch(batch_id: str, task_id: str, log: Path) -> LaneProcess:
        if can_fork():
            return ForkedLane(partial(_lane_in_child, batch_repo, options, batch_id, task_id, log))
        argv = [
            sys.executable, "-m", "imm_action", "lane", "--batch-id", batch_id,
            "--task", task_id, "--repo", str(batch_repo.root),
            "--executor", options.executor, "--log", str(log),
        ]  # fmt: skip
        return subprocess.Popen(
            argv, env=dict(options.environment), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    return launch


def _lane_in_child(
    batch_repo: BatchRepo, options: RunOptions, batch_id: str, task_id: str, log: Path
) -> int:
    """`imm lane` in a forked child: the batch repository as found by `imm run`, with fresh
    git handles; output to the lane's log."""
    from imm_action.commands import lane
    from imm_action.exits import run_guarded

    args = lane.LaneArgs(
        batch_id, task_id, batch_repo.root, None, options.executor, log,
        dict(options.environment),
    )  # fmt: skip
    initiatives = batch_repo.initiatives
    with open(log, "a", encoding="utf-8") as sink:
        return run_guarded(
            "lane",
            lambda io: lane.run(args, Ports(io, initiatives), batch_repo.forked()),
            CommandIO(sink, sink),
        )
