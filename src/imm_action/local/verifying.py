"""Candidates verified in the background of `imm run`, so that lanes never wait for the
integrator (ADR 0027).

The coordinator's passes run no check (`PassRequest.verify` False): a lane-committed child
whose candidate's checks are not known yet waits, and `BackgroundChecks` verifies the chain of
waiting candidates in a worker process forked from the coordinator — the same chain a pass
builds (`observe_candidates`: the ready lanes as one stack, its checks once on the top,
bisection of what fails there). Two at once, pipelined (issue 61): lanes that became ready
while a stack is verified are verified on its top beside it. The results come back over a pipe
into the coordinator's result cache, keyed by (tree, descriptor); the next pass finds them
there and lands what passed (the highest top they judge). Meanwhile the coordinator goes on
reaping lanes and admitting new ones.

The worker writes no ref and no state: only objects (candidate commits) and the check trees
under their locks, as any check does. Killed at any moment, it loses nothing but its own
unfinished checks, which a later worker runs again. A process, not a thread: the coordinator
forks its lanes, and a fork taken while another thread holds a lock or a half-made pipe would
hand that to every lane.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from imm_action.git import GitRunner
from imm_action.git.repo import GitRepo
from imm_action.integrate.landing import ready_to_integrate
from imm_action.lanes.local import frozen_heap
from imm_action.masking import Masker
from imm_action.model.outcome import CachedCheck, CheckCache, CheckResult
from imm_action.model.state import BatchRunState
from imm_action.passes.gate import gate_at
from imm_action.passes.intent_checks import IntentMemo
from imm_action.passes.observe import (
    BuiltCandidate,
    CandidateKey,
    CandidateMemo,
    observe_candidates,
)
from imm_action.verify.check_setup import CheckPlace
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache
from imm_action.workspace import config_path


@dataclass(frozen=True)
class CheckSettings:
    """What a worker needs besides the state: where the repository is, and how checks run."""

    root: Path
    path_env: str
    workers: int | None
    mask: Masker
    # the coordinator's repository: the worker takes a forked copy (what git said about the
    # repository is known already) instead of asking git again each round
    repo: GitRepo | None = None
    place: CheckPlace | None = None  # isolation and setup of the checks (check_setup.py)


@dataclass(frozen=True)
class _Chain:
    """The state and batch head a pass ended with, and the tasks' scopes."""

    state: BatchRunState
    head: str
    scopes: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Answer:
    """The new check results (a `CheckCache` text) and the candidates the worker built."""

    checks: str
    candidates: list[tuple[CandidateKey, BuiltCandidate]]
    intents: IntentMemo
    # reruns (integrate/flakes.py): (tree, digest, attempt, result as JSON)
    again: list[tuple[str, str, int, str]] = field(default_factory=list)
    runs: int = 0  # the check processes it ran


@dataclass
class _Worker:
    process: BaseProcess
    results: Connection
    covers: frozenset[tuple[str, str]]  # the ready lanes (task, lane commit) it verifies
    started: float = field(default_factory=time.monotonic)


# Workers verifying at once (issue 61, pipelined stacks): one for the ready stack, one more for
# that stack with the lanes that became ready since on its top — as Zuul's dependent pipeline
# verifies each change on the ones ahead of it. More would hold more cores than 2 keep busy.
PIPELINE = 2
# A second worker starts only once the first has been at work this long: a stack of quick
# checks lands sooner than a second worker starts, which would only run its checks again on a
# taller top (every held check reruns on every move) and take a core from the lanes.
PIPELINE_AFTER_S = 1.0


class BackgroundChecks:
    """At most PIPELINE workers at a time. `start` hands one the state and batch head a pass
    ended with — while one is at work, a second starts only when lanes it does not verify
    became ready since; `collect` takes what ended into `cache` (failures too, and says so in
    `failures_seen`), and counts the check processes they ran in `runs`."""

    def __init__(
        self, settings: CheckSettings, cache: ResultCache, candidates: CandidateMemo
    ) -> None:
        self._settings = settings
        self.cache = cache
        self._candidates = candidates
        self._workers: list[_Worker] = []
        # A failed check's result lands in the cache for the pass that parks its lane and no
        # longer (`ResultCache.stored` keeps only passes): the coordinator forgets it then.
        self.failures_seen = False
        self.runs = 0  # check processes the workers ran (issue 61: true counts)
        # the chain a second worker would verify, until the first has been at work long enough
        self._deferred: _Chain | None = None

    @property
    def busy(self) -> bool:
        return bool(self._workers)

    def start(self, state: BatchRunState, head: str, scopes: Mapping[str, tuple[str, ...]]) -> None:
        covers = frozenset(
            (child.task_id, child.lane.lane_commit)
            for child in ready_to_integrate(state)
            if child.lane is not None and child.lane.lane_commit is not None
        )
        if len(self._workers) >= PIPELINE:
            return
        if any(covers <= worker.covers for worker in self._workers):
            return  # nothing ready that a worker at work does not verify already
        chain = _Chain(state, head, dict(scopes))
        if self._workers and self._youngest_age() < PIPELINE_AFTER_S:
            self._deferred = chain  # `tick` starts it if the stack at work proves slow
            return
        self._start(chain, covers)

    def tick(self) -> None:
        """Start the second worker a `start` deferred, once the stack at work proved slow."""
        chain = self._deferred
        if chain is None or not self._workers or self._youngest_age() < PIPELINE_AFTER_S:
            return
        self._deferred = None
        self.start(chain.state, chain.head, chain.scopes)

    def _youngest_age(self) -> float:
        return time.monotonic() - max(worker.started for worker in self._workers)

    def _start(self, chain: _Chain, covers: frozenset[tuple[str, str]]) -> None:
        self._deferred = None
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_verify_in_child,
            args=(
                self._settings,
                self.cache,
                self._candidates,
                chain,
                send,
            ),
            daemon=False,
        )
        with frozen_heap():
            process.start()
        send.close()  # the worker holds the sending end; a lane forked later must not
        self._workers.append(_Worker(process, receive, covers))

    def collect(self) -> bool | None:
        """None while every worker is at work (or there is none); once one ended, True when its
        results are in the cache, False when it failed (its checks were not all run)."""
        for worker in self._workers:
            if worker.results.poll() or worker.process.exitcode is not None:
                self._workers.remove(worker)
                self._deferred = None  # the pass that follows starts what is due
                return self._taken(worker)
        return None

    def _taken(self, worker: _Worker) -> bool:
        try:
            found: _Answer | None = worker.results.recv()
        except (EOFError, OSError):
            found = None  # it ended without an answer
        worker.results.close()
        worker.process.join()
        if found is None:
            return False
        self.runs += found.runs
        for entry in CheckCache.model_validate_json(found.checks).entries:
            if self.cache.get(entry.tree, entry.descriptor_digest) is None:
                self.cache.put(entry.tree, entry.descriptor_digest, entry.result)
            self.failures_seen = self.failures_seen or not entry.result.passed
        for tree, digest, attempt, text in found.again:
            result = CheckResult.model_validate_json(text)
            if self.cache.get_again(tree, digest, attempt) is None:
                self.cache.put_again(tree, digest, attempt, result)
            self.failures_seen = self.failures_seen or not result.passed
        for key, built in found.candidates:
            self._candidates.put(key, built)
        self._candidates.intents.update(found.intents)
        return True

    def sentinels(self) -> list[Connection | int]:
        """What becomes ready when a worker answers or ends (nothing when none runs)."""
        return [handle for w in self._workers for handle in (w.results, w.process.sentinel)]

    def stop(self) -> None:
        """End the workers at once: they hold nothing that a later run cannot take back."""
        for worker in self._workers:
            if worker.process.exitcode is None:
                with contextlib.suppress(OSError):
                    worker.process.kill()
            worker.process.join()
            worker.results.close()
        self._workers = []
        self._deferred = None


def _verify_in_child(
    settings: CheckSettings,
    known: ResultCache,
    candidates: CandidateMemo,
    chain: _Chain,
    send: Connection,
) -> None:
    """In the forked worker: fresh git handles (the coordinator's stay its own), the chain a
    pass would build, its checks run; the new results go back as one `CheckCache` text."""
    code = 1
    try:
        repo = (
            settings.repo.forked()
            if settings.repo is not None
            else GitRepo(settings.root, GitRunner(settings.root))
        )
        built_before = set(candidates.built)
        intents_before = set(candidates.intents)
        verifier = Verifier(
            repo,
            known,
            path_env=settings.path_env,
            workers=settings.workers,
            mask=settings.mask,
            place=settings.place,
        )
        known_before = {(tree, digest) for tree, digest, _ in known.entries()}
        # the whole ready stack: verified as one, it costs its distinct checks once, however
        # long (SPEC §5.4), and every lane of it lands in the next pass
        state = chain.state
        observe_candidates(
            repo,
            verifier,
            state,
            chain.head,
            ready_to_integrate(state),
            scopes=chain.scopes,
            memo=candidates,
            # the branch checks, as the pass judges the stack by them (issue 44)
            gate=gate_at(repo.path, state.judged_at, config_path()),
        )
        # every result it found, failures and bisection probes too: the next pass judges the
        # stack from them (the cache keeps only passes for the state)
        new = [
            CachedCheck(tree=tree, descriptor_digest=digest, result=result)
            for tree, digest, result in known.entries()
            if (tree, digest) not in known_before
        ]
        again = [
            (tree, digest, attempt, result.model_dump_json())
            for tree, digest, attempt, result in known.entries_again()
        ]
        built = [(k, v) for k, v in candidates.built.items() if k not in built_before]
        intents = {k: v for k, v in candidates.intents.items() if k not in intents_before}
        answer = CheckCache(entries=new).model_dump_json()
        send.send(_Answer(answer, built, intents, again, verifier.runs))
        code = 0
    except BaseException:  # stopped or failed: its exit code says so, its answer is missing
        code = 1
    finally:
        # no atexit, no buffers of the coordinator flushed twice: this process only verifies
        os._exit(code)
