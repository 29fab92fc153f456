"""Check results known in a batch, by (tree, descriptor digest): what no pass runs twice, what
the state keeps of them, and the batch head's runs (what candidates are judged against)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from imm_action.model.outcome import CachedCheck, CheckCache, CheckResult
from imm_action.verify.check_queue import Queued
from imm_action.verify.same_run import run_key, served, serves


class ResultCache:
    """(tree, descriptor digest) -> result; thread-safe; seeded from and saved to the state."""

    def __init__(self, stored: CheckCache | None = None) -> None:
        self._lock = threading.Lock()
        self._tree_locks: dict[str, threading.Lock] = {}
        self._results: dict[tuple[str, str], CheckResult] = {}
        # a check's reruns on a tree (integrate/flakes.py), by attempt
        self._again: dict[tuple[str, str, int], CheckResult] = {}
        # per digest, the last tree it passed on: what a descriptor that declares what it
        # reads carries over to a tree that changed none of that
        self._last_pass: dict[str, str] = {}
        # per digest, the last tree it ran and passed on: what the state keeps (a carried
        # pass is derived again from it, cheaply)
        self._last_run: dict[str, str] = {}
        # per digest, how long its newest run took: the queue runs the longest first
        self._durations: dict[str, int] = {}
        self._stored: CheckCache | None = None
        # (tree, digest, attempt) results a stack's record has counted as runs already
        self._counted: set[tuple[str, str, int]] = set()
        # (tree, digest) results run ahead, for a stack not judged yet (Verifier.verify_ahead)
        self._ahead: set[tuple[str, str]] = set()
        # per (tree, run key), the check whose run there may serve others (verify/same_run.py)
        self._runs: dict[tuple[str, str], Queued] = {}
        # the batch head's tree: its runs are kept whatever ran since (what a candidate's
        # tests are judged against, issue 58)
        self._head: str | None = None
        if stored is not None:
            self.seed(stored)
        self._stored = None

    def seed(self, stored: CheckCache) -> None:
        """Take in the results a state stored that are not known here. Each was run, and
        counted, by the pass that stored it: reused, it is no run of a stack's."""
        for entry in stored.entries:
            key = (entry.tree, entry.descriptor_digest)
            if entry.result.passed and self.get(*key) is None:  # (older states kept failures)
                self.put(*key, entry.result)
                with self._lock:
                    self._counted.add((*key, 0))

    def first_counted(self, keys: Iterable[tuple[str, str, int]]) -> int:
        """How many of these (tree, digest, attempt) results no stack counted before; from
        now on they are counted. A result a later stack reuses is not a run of it."""
        with self._lock:
            fresh = set(keys) - self._counted
            self._counted |= fresh
            return len(fresh)

    def note_ahead(self, keys: Iterable[tuple[str, str]]) -> None:
        with self._lock:
            self._ahead |= set(keys)

    def run_ahead(self, keys: Iterable[tuple[str, str, int]]) -> int:
        """How many of these (tree, digest, attempt) results were run ahead of their stack."""
        with self._lock:
            return sum(1 for tree, digest, attempt in keys
                       if not attempt and (tree, digest) in self._ahead)  # fmt: skip

    def passes_only(self) -> ResultCache:
        """A cache of the passes the state keeps, without the failures (a failure never
        outlives the pass that used it), remembering what was counted."""
        kept = ResultCache(self.stored())
        with self._lock:
            kept._counted = set(self._counted)
            kept._head = self._head
        return kept

    def hold(self, tree: str) -> None:
        """Keep the runs on `tree`, the batch head's, in what the state stores: a bisection's
        probes ran since, but candidates are judged against the head's tests."""
        with self._lock:
            if tree != self._head:
                self._head = tree
                self._stored = None

    def tree_lock(self, tree: str) -> threading.Lock:
        """Held while a tree is verified, so two workers never run its checks twice."""
        with self._lock:
            return self._tree_locks.setdefault(tree, threading.Lock())

    def get(self, tree: str, digest: str) -> CheckResult | None:
        with self._lock:
            return self._results.get((tree, digest))

    def put(self, tree: str, digest: str, result: CheckResult) -> None:
        with self._lock:
            self._results[(tree, digest)] = result
            if not result.carried_over:
                self._durations[digest] = result.duration_ms
            if result.passed:
                self._last_pass[digest] = tree
                if not result.carried_over:
                    self._last_run[digest] = tree
                    self._stored = None

    def note_run(self, tree: str, check: Queued) -> None:
        """`check` ran on `tree`: its run may serve a check of the same run there."""
        with self._lock:
            self._runs[(tree, run_key(check))] = check

    def serving(self, tree: str, check: Queued) -> CheckResult | None:
        """`check`'s verdict from the run of another check of the same run on `tree`."""
        with self._lock:
            run_by = self._runs.get((tree, run_key(check)))
            found = None if run_by is None else self._results.get((tree, run_by.digest))
        if run_by is None or found is None or not serves(run_by, check):
            return None
        return served(found, run_by, check)

    def duration_ms(self, digest: str) -> int | None:
        """How long the newest run of `digest` took (None: never run, as far as known)."""
        with self._lock:
            return self._durations.get(digest)

    def last_pass(self, digest: str) -> tuple[str, CheckResult] | None:
        """The newest tree `digest` passed on, with that result."""
        with self._lock:
            tree = self._last_pass.get(digest)
            return None if tree is None else (tree, self._results[(tree, digest)])

    def get_again(self, tree: str, digest: str, attempt: int) -> CheckResult | None:
        with self._lock:
            return self._again.get((tree, digest, attempt))

    def put_again(self, tree: str, digest: str, attempt: int, result: CheckResult) -> None:
        """A check's `attempt`-th rerun on `tree`."""
        with self._lock:
            self._again[(tree, digest, attempt)] = result

    def entries_again(self) -> list[tuple[str, str, int, CheckResult]]:
        with self._lock:
            return [(tree, digest, n, result) for (tree, digest, n), result in self._again.items()]

    def entries(self) -> list[tuple[str, str, CheckResult]]:
        """Every (tree, digest, result) known, failures too."""
        with self._lock:
            return [(tree, digest, result) for (tree, digest), result in self._results.items()]

    def stored(self) -> CheckCache:
        """The cache as the state stores it; built again only after a `put` of a check run
        (every write of the state asks for it). Per descriptor only its newest run that passed
        is kept: the branch only moves on, so an older tree is not asked about again, and every
        integrated task's check is owed on every move (SPEC §5.4) — keeping every (tree,
        descriptor) pair would grow the state by the whole branch's checks on every move. A
        pass carried over is not kept: the next pass carries it again from the run. Failures
        are not kept past the pass that ran them: a failure may be a timeout on a loaded
        runner, and `imm retry` of the same tree must run the check again, not park it from
        the cache."""
        with self._lock:
            if self._stored is None:
                kept = set(self._last_run.items())
                kept.update(
                    (digest, tree)
                    for (tree, digest), result in self._results.items()
                    if tree == self._head and result.passed and not result.carried_over
                )
                entries = [
                    CachedCheck(
                        tree=tree, descriptor_digest=digest, result=self._results[(tree, digest)]
                    )
                    for digest, tree in sorted(kept, key=lambda i: (i[1], i[0]))
                ]
                self._stored = CheckCache(entries=entries)
            return self._stored
