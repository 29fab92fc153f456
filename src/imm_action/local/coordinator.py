"""`imm run`: list scheduling on one machine. Every time a lane ends, a reconcile pass runs at
once, lands what is verified and admits what became startable; lanes are `imm lane`
processes, each in its own git worktree, so the user's checkout is never touched. The passes
run no check: candidates are verified in a background worker (`local/verifying.py`) while
lanes go on, and the pass after it lands them (ADR 0027). How a lane process is started is
handed in (`LaneLauncher`): the coordinator knows no command."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait

from imm_action.batches.pass_inputs import PlanMemo, pass_ports, pass_request
from imm_action.batches.repo import BatchRepo, check_place, logs_folder, setup_commit
from imm_action.credentials import token
from imm_action.errors import ImmError
from imm_action.git import GitError
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.store import StateStore
from imm_action.lanes.folders import lanes_root, remove_leftovers
from imm_action.lanes.local import LaneLauncher, LocalLanes, RunningLane
from imm_action.lanes.runners import LaneStart
from imm_action.local.verifying import BackgroundChecks, CheckSettings
from imm_action.masking import masker_for
from imm_action.model.intent import intent_path
from imm_action.model.refs import batch_state_ref
from imm_action.model.state import BatchRunState, ChildState
from imm_action.passes.driver import reconcile
from imm_action.passes.observe import CandidateMemo
from imm_action.passes.request import PassRequest, PassResult
from imm_action.text import listed, plural
from imm_action.verify.overlay_memory import bases_in_memory
from imm_action.verify.overlays import tidy_overlays
from imm_action.verify.overlays import usable as overlays_usable
from imm_action.verify.result_cache import ResultCache
from imm_action.verify.trees import tidy_pool
from imm_action.workspace import load_config_at

POLL_S = 0.02
STATE_POLL_S = 0.5  # how often a waiting coordinator looks for other writers (imm cancel)
PACK_EVERY_PASSES = 200
LOOSE_OBJECTS_WORTH_A_PACK = 1000


@dataclass
class CoordinatorView:
    """What the progress display shows."""

    state: BatchRunState | None = None
    running: dict[str, RunningLane] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    # integration over the whole run: stacks verified, checks run, checks carried over
    stacks: int = 0
    check_runs: int = 0  # by this run's passes (the base's branch checks, or stacks verified)
    worker_runs: int = 0  # by the background workers: every process, used or not (issue 61)
    checks_carried: int = 0

    def integration_line(self) -> str | None:
        """What integration cost in this run, for the closing report; None when nothing was
        verified."""
        if not self.stacks:
            return None
        return (
            f"integration: {plural(self.stacks, 'stack')} verified, "
            f"{plural(self.check_runs + self.worker_runs, 'check run')}, "
            f"{self.checks_carried} carried over"
        )


@dataclass(frozen=True)
class RunOptions:
    slug: str
    executor: str
    max_parallel: int | None
    batch_id: str | None
    environment: Mapping[str, str]
    # A stopped batch is continued (SPEC §5.7); `--fresh` archives its branch and starts anew.
    fresh: bool = False


class Coordinator:
    def __init__(
        self,
        batch_repo: BatchRepo,
        options: RunOptions,
        on_change: Callable[[CoordinatorView], None],
        launcher: LaneLauncher,
        planned: Callable[[], None] = lambda: None,
    ) -> None:
        self.batch_repo = batch_repo
        self.planned = planned  # called once the inputs are planned: nothing written before
        self.options = options
        self.on_change = on_change
        self.state_commit: str | None = None
        self.plans: PlanMemo = {}
        common = batch_repo.repo.common_directory()
        log_dir = logs_folder(batch_repo)
        log_dir.mkdir(parents=True, exist_ok=True)
        # folders of lanes a SIGKILL ended before they could remove them (lanes/folders.py)
        remove_leftovers(lanes_root(common))
        self.lanes = LocalLanes(os.getpid(), launcher, log_dir, self._event)
        self.view = CoordinatorView(running=self.lanes.running)
        self.results = ResultCache()  # check results of this run, kept between passes
        # where lane code runs: in the sandbox (the log says so); `check_setup` runs first,
        # once, before the background worker forks
        self.place = check_place(
            batch_repo, options.environment.get("PATH", ""), self._event,
            holds_token=token() is not None,
            setup_at=setup_commit(batch_repo, options.slug, fresh=options.fresh),
        )  # fmt: skip
        settings = CheckSettings(
            batch_repo.root,
            options.environment.get("PATH", ""),
            batch_repo.config.verify_parallel,
            masker_for(options.environment),
            batch_repo.repo,
            self.place,
        )
        self.candidates = CandidateMemo()  # candidates built, kept between passes
        self.checks = BackgroundChecks(settings, self.results, self.candidates)
        self.verify_here = False  # the worker failed: the next pass runs its checks itself
        self.request: PassRequest | None = None

    def run(self) -> BatchRunState:
        """Drive the batch until nothing is in flight and nothing can start."""
        try:
            # the overlays' base lies in memory for this run (overlays.py), gone at its end
            with bases_in_memory():
                # the intents and the plan first: a typo is refused in a second, before
                # `check_setup` spends minutes installing (issue 41 #4); planned once, kept
                for task, warning in self._request().scope_conflicts:
                    self._event(f"warning: {intent_path(task)}: {warning}")
                self.planned()
                self.place.prepared(self.batch_repo.repo)
                # whether trees can be overlays, asked once before any fork: every lane and
                # worker forked later inherits the answer (each asked the kernel itself, a
                # sandbox start, about seven times a task)
                overlays_usable(self.place.confinement)
                return self._run()
        finally:
            self.checks.stop()
            self.place.close()
            # overlays left and the base in memory go however the run ends; after Ctrl-C the
            # lanes still hold the base here, and `interrupt` removes it once they ended
            self._tidy_overlays()

    def _run(self) -> BatchRunState:
        self._say_if_resuming()
        result = self._pass()
        passes = 1
        while True:
            self._start_admitted(result)
            state = result.stored.state
            waiting = bool(result.unverified) and not state.batch_state.is_terminal
            if waiting and result.head is not None and self.request is not None:
                self.checks.start(state, result.head, self.request.scopes)
            idle = not self.lanes.running and not result.admitted and not waiting
            if state.batch_state.is_terminal or idle:
                self.checks.stop()
                self.lanes.stop_all()
                tidy_pool(self.batch_repo.repo)  # the overlays: in `run`'s finally, however it ends
                # a small batch's few hundred objects cost git nothing loose; packing them
                # would cost the run's last tenth of a second
                self.batch_repo.repo.pack_loose_objects(at_least=LOOSE_OBJECTS_WORTH_A_PACK)
                return state
            self._wait_for_a_lane()
            result = self._pass()
            passes += 1
            if passes % PACK_EVERY_PASSES == 0:
                # Every pass writes a few small objects and every lane a tree or two: packed
                # as they come, a 1,000-task batch leaves megabytes in .git, not hundreds.
                self.batch_repo.repo.pack_loose_objects()

    def _say_if_resuming(self) -> None:
        """A run that takes up a live batch (after Ctrl-C, a crash, or on another machine)
        says so first, and what it found."""
        if self.options.fresh:
            return
        refs = self.batch_repo.refs
        refs.refresh()
        store = StateStore(refs)
        stored = (
            store.load(self.options.batch_id)
            if self.options.batch_id
            else store.active(self.options.slug)
        )
        if stored is None or stored.state.batch_state.is_terminal:
            return
        children = stored.state.children
        done = sum(1 for child in children if child.state.done)
        flying = [child.task_id for child in children if child.state.in_flight]
        taken_up = (
            f"; lanes that were at work ({listed(flying)}) are taken up again" if flying else ""
        )
        self._event(
            f"resuming batch {stored.state.batch_id} ({stored.state.batch_state}, started "
            f"{stored.state.created_at}): {done} of {plural(len(children), 'task')} "
            f"integrated{taken_up}"
        )

    def interrupt(self) -> None:
        """Ctrl-C: end the running lanes cleanly; the next `imm run` resumes the batch."""
        self.checks.stop()
        self.lanes.stop_all()
        self._tidy_overlays()

    def _tidy_overlays(self) -> None:
        with contextlib.suppress(OSError, GitError):
            tidy_overlays(self.batch_repo.repo)

    # -- passes and lanes ------------------------------------------------------------------
    def _request(self) -> PassRequest:
        return pass_request(
            self.batch_repo,
            self.options.slug,
            batch_id=self.options.batch_id,
            admit=True,
            stopped=Stopped.FRESH if self.options.fresh else Stopped.CONTINUE,
            plans=self.plans,  # planned once per run, again only when the base commit moves
        )

    def _pass(self) -> PassResult:
        request = self._request()
        # checks run in the background worker, unless it failed (then here, as before)
        # the lanes at work's spend so far counts against the cost budget (issue 45)
        request = replace(
            request, verify=self.verify_here, in_flight_usd=self.lanes.in_flight_usd()
        )
        self.verify_here = False
        if self.options.max_parallel is not None:
            plan = request.plan.model_copy(update={"max_parallel": self.options.max_parallel})
            request = replace(request, plan=plan, parallel_asked=self.options.max_parallel)
        ports = pass_ports(
            self.batch_repo,
            self._event,
            path_env=self.options.environment.get("PATH", ""),
            lanes=self.lanes,
            mask=masker_for(self.options.environment),
            candidates=self.candidates,
            place=self.place,
        )
        self.request = request
        result = reconcile(request, ports, self.results)
        self.view.check_runs += result.base_check_runs
        for stack in result.stacks:
            self.view.stacks += 1
            if request.verify:  # else the background workers ran them: counted as they end
                self.view.check_runs += stack.check_runs
            self.view.checks_carried += stack.carried
        self.view.worker_runs = self.checks.runs
        if self.checks.failures_seen:
            # the pass used the failures the worker found; a failure never outlives that
            # pass (a later retry of the same tree runs its check again), passes are kept
            self.results = self.results.passes_only()
            self.checks.cache = self.results
            self.checks.failures_seen = False
        self.state_commit = result.stored.commit
        self.options = replace(self.options, batch_id=result.stored.state.batch_id)
        self.view.state = result.stored.state
        self.on_change(self.view)
        return result

    def _start_admitted(self, result: PassResult) -> None:
        state = result.stored.state
        # a speculative lane set back (a dependency of its base was parked) works for nothing
        self.lanes.stop_some(
            child.task_id for child in state.children if child.state is ChildState.PENDING
        )
        if any(child.state is ChildState.LANE_ADMITTED for child in state.children):
            # Lanes run with the config the batch was planned with (commands/lane.py): read
            # once here, a forked lane finds it in the memo instead of parsing it again.
            with contextlib.suppress(ImmError, GitError):
                load_config_at(self.batch_repo.root, state.judged_at)
        self.lanes.start(
            [
                LaneStart(state.batch_id, child.task_id, child.lane.runner)
                for child in state.children
                if child.state is ChildState.LANE_ADMITTED and child.lane is not None
            ]
        )

    def _wait_for_a_lane(self) -> None:
        """Until a lane ends, the background checks end, or someone else wrote the batch state
        (e.g. `imm cancel`)."""
        next_look = time.monotonic() + STATE_POLL_S
        while True:
            ended = self.lanes.reap()
            if ended:
                for lane, code in ended:
                    self._event(
                        f"lane {lane.task_id} ended ({'ok' if code == 0 else f'exit {code}'})"
                    )
                return
            self.checks.tick()  # a stack slow to verify: the lanes ready since, beside it
            verified = self.checks.collect()
            if verified is not None:
                self.verify_here = not verified
                return
            if time.monotonic() >= next_look:
                if self._state_moved():
                    return
                next_look = time.monotonic() + STATE_POLL_S
                self.on_change(self.view)  # the lanes' elapsed times, twice a second
            self._sleep_until_something_ends(next_look)

    def _sleep_until_something_ends(self, until: float) -> None:
        """Until a lane ends or the worker answers (woken at once: a dependency hop waits for
        no polling interval), or `until`."""
        lanes = self.lanes.sentinels()
        if lanes is None:
            time.sleep(POLL_S)
            return
        handles = [*lanes, *self.checks.sentinels()]
        wait(handles, timeout=max(0.0, until - time.monotonic()))

    def _state_moved(self) -> bool:
        ref = batch_state_ref(self.options.batch_id or "")
        return self.batch_repo.refs.read([ref])[ref] != self.state_commit

    def _event(self, line: str) -> None:
        self.view.events.append(line)
        self.on_change(self.view)
