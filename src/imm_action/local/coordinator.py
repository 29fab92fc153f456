"""`imm run`: list scheduling on one machine. Every time a lane ends, a reconcile pass runs at
once, integrates what is ready and admits what became startable; lanes are `imm lane`
processes, each in its own git worktree, so the user's checkout is never touched."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from imm_action.batches.repo import BatchRepo, pass_ports, pass_request
from imm_action.console import CommandIO
from imm_action.integrate.reconcile import PassResult, reconcile
from imm_action.integrate.refs import batch_state_ref
from imm_action.lanes.folders import lanes_root, remove_leftovers
from imm_action.lanes.probe import CoordinatorProbe
from imm_action.model.state import BatchRunState, ChildState, LocalRunner, Runner

POLL_S = 0.02
STATE_POLL_S = 0.5  # how often a waiting coordinator looks for other writers (imm cancel)


class LaneProcess(Protocol):
    """A running lane, whichever way it was started."""

    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class _ForkedLane:
    """A lane forked from the coordinator: it inherits the imports already loaded, so a lane
    starts in milliseconds instead of the ~0.2 s a fresh interpreter needs."""

    def __init__(self, target: Callable[[], int]) -> None:
        context = multiprocessing.get_context("fork")
        self._process = context.Process(target=_exit_with, args=(target,), daemon=False)
        self._process.start()
        assert self._process.pid is not None
        self.pid = self._process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(["imm lane"], timeout or 0)
        return self._process.exitcode

    def kill(self) -> None:
        self._process.kill()


def _exit_with(target: Callable[[], int]) -> None:
    sys.exit(target())


@dataclass
class RunningLane:
    task_id: str
    process: LaneProcess
    log: Path
    started: float


@dataclass
class CoordinatorView:
    """What the progress display shows."""

    state: BatchRunState | None = None
    running: dict[str, RunningLane] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunOptions:
    slug: str
    executor: str
    max_parallel: int | None
    batch_id: str | None
    environment: Mapping[str, str]


class Coordinator:
    def __init__(
        self,
        batch_repo: BatchRepo,
        options: RunOptions,
        on_change: Callable[[CoordinatorView], None],
    ) -> None:
        self.batch_repo = batch_repo
        self.options = options
        self.on_change = on_change
        self.view = CoordinatorView()
        self.exited: set[str] = set()
        self.run_id = uuid.uuid4().hex[:8]
        self.state_commit: str | None = None
        common = batch_repo.repo.git.output(["rev-parse", "--git-common-dir"]).strip()
        self.log_dir = (batch_repo.root / common).resolve() / "imm" / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # folders of lanes a SIGKILL ended before they could remove them (lanes/folders.py)
        remove_leftovers(lanes_root((batch_repo.root / common).resolve()))

    def run(self) -> BatchRunState:
        """Drive the batch until nothing is in flight and nothing can start."""
        result = self._pass()
        while True:
            self._start_admitted(result)
            state = result.stored.state
            if state.batch_state.is_terminal or (not self.view.running and not result.admitted):
                self._stop_all()
                return state
            self._wait_for_a_lane()
            result = self._pass()

    def interrupt(self) -> None:
        """Ctrl-C: end the running lanes cleanly; the next `imm run` resumes the batch."""
        self._stop_all()

    # -- passes and lanes ------------------------------------------------------------------
    def _pass(self) -> PassResult:
        request = pass_request(
            self.batch_repo,
            self.options.slug,
            batch_id=self.options.batch_id,
            admit=True,
            runner_for=self._runner_for,
        )
        if self.options.max_parallel is not None:
            plan = request.plan.model_copy(update={"max_parallel": self.options.max_parallel})
            request = replace(request, plan=plan)
        ports = pass_ports(
            self.batch_repo,
            self._event,
            path_env=self.options.environment.get("PATH", ""),
            probe=CoordinatorProbe(os.getpid(), self.exited),
        )
        result = reconcile(request, ports)
        self.state_commit = result.stored.commit
        self.options = replace(self.options, batch_id=result.stored.state.batch_id)
        self.view.state = result.stored.state
        self.on_change(self.view)
        return result

    def _runner_for(self, task_id: str) -> Runner:
        log = self.log_dir / f"{task_id}-{self.run_id}-{uuid.uuid4().hex[:6]}.log"
        return LocalRunner(path=str(log), pid=os.getpid())

    def _start_admitted(self, result: PassResult) -> None:
        state = result.stored.state
        for child in state.children:
            if child.state is not ChildState.LANE_ADMITTED or child.task_id in self.view.running:
                continue
            assert child.lane is not None
            runner = child.lane.runner
            if not isinstance(runner, LocalRunner) or runner.pid != os.getpid():
                continue  # another coordinator's lane, or one for `imm lane` by hand
            self._spawn(state.batch_id, child.task_id, Path(runner.path))

    def _spawn(self, batch_id: str, task_id: str, log: Path) -> None:
        # Either way the lane stays in the coordinator's process group: a Ctrl-C or a kill of
        # `imm run` ends its lanes too.
        process: LaneProcess
        if "fork" in multiprocessing.get_all_start_methods():
            process = _ForkedLane(partial(self._lane_in_child, batch_id, task_id, log))
        else:
            argv = [
                sys.executable, "-m", "imm_action", "lane", "--batch-id", batch_id,
                "--task", task_id, "--repo", str(self.batch_repo.root),
                "--executor", self.options.executor, "--log", str(log),
            ]  # fmt: skip
            process = subprocess.Popen(
                argv, env=dict(self.options.environment), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        self.view.running[task_id] = RunningLane(task_id, process, log, time.monotonic())
        self._event(f"lane {task_id} started (log: {log})")

    def _lane_in_child(self, batch_id: str, task_id: str, log: Path) -> int:
        """`imm lane` in a forked child: fresh git handles, output to the lane's log."""
        from imm_action.commands import lane
        from imm_action.exits import run_guarded
        from imm_action.ports import Ports

        args = lane.LaneArgs(
            batch_id, task_id, self.batch_repo.root, None, self.options.executor, log,
            dict(self.options.environment),
        )  # fmt: skip
        with open(log, "a", encoding="utf-8") as sink:
            initiatives = self.batch_repo.initiatives
            return run_guarded(
                "lane", lambda io: lane.run(args, Ports(io, initiatives)), CommandIO(sink, sink)
            )

    def _wait_for_a_lane(self) -> None:
        """Until a lane ends, or someone else wrote the batch state (e.g. `imm cancel`)."""
        next_look = time.monotonic() + STATE_POLL_S
        while True:
            finished = [
                lane for lane in self.view.running.values() if lane.process.poll() is not None
            ]
            if finished:
                for lane in finished:
                    del self.view.running[lane.task_id]
                    self.exited.add(str(lane.log))
                    code = lane.process.poll()
                    self._event(
                        f"lane {lane.task_id} ended ({'ok' if code == 0 else f'exit {code}'})"
                    )
                return
            if time.monotonic() >= next_look:
                if self._state_moved():
                    return
                next_look = time.monotonic() + STATE_POLL_S
            self.on_change(self.view)
            time.sleep(POLL_S)

    def _state_moved(self) -> bool:
        ref = batch_state_ref(self.options.batch_id or "")
        return self.batch_repo.refs.read([ref])[ref] != self.state_commit

    def _stop_all(self) -> None:
        for lane in self.view.running.values():
            if lane.process.poll() is None:
                lane.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        for lane in self.view.running.values():
            try:
                lane.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                lane.process.kill()
                lane.process.wait()
        self.view.running.clear()

    def _event(self, line: str) -> None:
        self.view.events.append(line)
        self.on_change(self.view)
