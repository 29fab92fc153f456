"""Apply: a pass's decisions written through the one ref store, each write a compare-and-swap
of the batch state together with whatever else the same step moves (the batch branch). A lost
CAS raises `GitConflict`; the driver then runs the pass again on fresh refs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from imm_action.git.repo import RefUpdate
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.integrate.verdict import Verdict, build_report
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState
from imm_action.verify.result_cache import ResultCache


class Applier:
    def __init__(self, store: StateStore, results: ResultCache, clock: Callable[[], str]) -> None:
        self.store = store
        self.results = results
        self.clock = clock

    def start(
        self,
        state: BatchRunState,
        verdict: Verdict,
        branch: RefUpdate,
        also: Sequence[RefUpdate] = (),
    ) -> StoredBatch:
        """A new batch: its first state and its branch (and `also`), in one CAS."""
        report = build_report(state, verdict, state.created_at)
        return self.store.write(None, state, report, self.results.stored(), also=[branch, *also])

    def persist(
        self,
        stored: StoredBatch,
        state: BatchRunState,
        verdict: Verdict,
        also: Sequence[RefUpdate] = (),
        keep: Sequence[str] = (),
    ) -> StoredBatch:
        """Write `state` with the batch state of `verdict`; an idle pass writes nothing.
        `keep`: commits the state commit holds as further parents (landed outcomes)."""
        now = self.clock()
        final = state.model_copy(update={"batch_state": verdict.batch_state})
        report = build_report(final, verdict, now)
        if not also and self._same(stored, final, report):
            return stored
        final = final.model_copy(update={"updated_at": now})
        report = build_report(final, verdict, now)
        return self.store.write(stored, final, report, self.results.stored(), also=also, keep=keep)

    def _same(self, stored: StoredBatch, state: BatchRunState, report: BatchRunReport) -> bool:
        if stored.report is None:
            return False
        fresh_state = state.model_copy(update={"updated_at": stored.state.updated_at})
        fresh_report = report.model_copy(update={"created_at": stored.report.created_at})
        return (
            fresh_state == stored.state
            and fresh_report == stored.report
            and self.results.stored() == stored.cache
        )
