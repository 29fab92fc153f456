"""Candidates verified in the background of `imm run`, so that lanes never wait for the
integrator (ADR 0027).

The coordinator's passes run no check (`PassRequest.verify` False): a lane-committed child
whose candidate's checks are not known yet waits, and `BackgroundChecks` verifies the chain of
waiting candidates in a worker process forked from the coordinator — the same chain a pass
builds (`observe_candidates`: the ready lanes as one stack, its checks once on the top,
bisection of what fails there). The results come back
over a pipe into the coordinator's result cache, keyed by (tree, descriptor); the next pass
finds them there and lands what passed. Meanwhile the coordinator goes on reaping lanes and
admitting new ones.

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
    # fresh runs on the batch head: (tree, digest, attempt, result as JSON)
    again: list[tuple[str, str, int, str]] = field(default_factory=list)


@dataclass
class _Worker:
    process: BaseProcess
    results: Connection


class BackgroundChecks:
    """At most one worker at a time. `start` hands it the state and batch head a pass ended
    with; `collect` takes its results into `cache` once it is done (failures too, and says so
    in `failures_seen`)."""

    def __init__(
        self, settings: CheckSettings, cache: ResultCache, candidates: CandidateMemo
    ) -> None:
        self._settings = settings
        self.cache = cache
        self._candidates = candidates
        self._worker: _Worker | None = None
        # A failed check's result lands in the cache for the pass that parks its lane and no
        # longer (`ResultCache.stored` keeps only passes): the coordinator forgets it then.
        self.failures_seen = False

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def start(self, state: BatchRunState, head: str, scopes: Mapping[str, tuple[str, ...]]) -> None:
        if self._worker is not None:
            return
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_verify_in_child,
            args=(
                self._settings,
                self.cache,
                self._candidates,
                _Chain(state, head, dict(scopes)),
                send,
            ),
            daemon=False,
        )
        with frozen_heap():
            process.start()
        send.close()  # the worker holds the sending end; a lane forked later must not
        self._worker = _Worker(process, receive)

    def collect(self) -> bool | None:
        """None while the worker is at work (or there is none); once it ended, True when its
        results are in the cache, False when it failed (its checks were not all run)."""
        worker = self._worker
        if worker is None:
            return None
        if not worker.results.poll() and worker.process.exitcode is None:
            return None
        try:
            found: _Answer | None = worker.results.recv()
        except (EOFError, OSError):
            found = None  # it ended without an answer
        worker.results.close()
        worker.process.join()
        self._worker = None
        if found is None:
            return False
        for entry in CheckCache.model_validate_json(found.checks).entries:
            if self.cache.get(entry.tree, entry.descriptor_digest) is None:
                self.cache.put(entry.tree, entry.descriptor_digest, entry.result)
            self.failures_seen = self.failures_seen or not entry.result.passed
        for tree, digest, attempt, text in found.again:
            result = CheckResult.model_validate_json(text)
            self.cache.put_again(tree, digest, attempt, result)
            self.failures_seen = self.failures_seen or not result.passed
        for key, built in found.candidates:
            self._candidates.put(key, built)
        self._candidates.intents.update(found.intents)
        return True

    def sentinels(self) -> list[Connection | int]:
        """What becomes ready when the worker answers or ends (nothing when none runs)."""
        worker = self._worker
        return [] if worker is None else [worker.results, worker.process.sentinel]

    def stop(self) -> None:
        """End the worker at once: it holds nothing that a later run cannot take back."""
        worker = self._worker
        if worker is None:
            return
        if worker.process.exitcode is None:
            with contextlib.suppress(OSError):
                worker.process.kill()
        worker.process.join()
        worker.results.close()
        self._worker = None


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
        send.send(_Answer(CheckCache(entries=new).model_dump_json(), built, intents, again))
        code = 0
    except BaseException:  # stopped or failed: its exit code says so, its answer is missing
        code = 1
    finally:
        # no atexit, no buffers of the coordinator flushed twice: this process only verifies
        os._exit(code)
