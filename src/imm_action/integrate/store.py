"""Batch state in git: a commit chain at `refs/imm/batches/<batch_id>` (SPEC §5.5).

Each commit's tree holds `state.json`, `report.json` and `checks.json` (the descriptor-result
cache); the chain is the audit log. Every write is a compare-and-swap together with whatever
other refs the same step moves (the batch branch), so they can never disagree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from imm_action.errors import ImmError
from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, RefUpdate
from imm_action.model.common import canonical_model_text
from imm_action.model.outcome import CheckCache
from imm_action.model.refs import BATCHES, batch_state_ref
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState


class CorruptStateError(ImmError):
    """A state commit that does not hold a valid state; nothing will overwrite it."""


@dataclass(frozen=True)
class StoredBatch:
    state: BatchRunState
    report: BatchRunReport | None
    cache: CheckCache
    commit: str


@dataclass(frozen=True)
class PreparedState:
    stored: StoredBatch
    update: RefUpdate


class StateStore:
    def __init__(self, refs: RefStore) -> None:
        self.refs = refs

    def load(self, batch_id: str) -> StoredBatch | None:
        commit = self.refs.read([batch_state_ref(batch_id)])[batch_state_ref(batch_id)]
        return None if commit is None else self._load_commit(batch_id, commit)

    def all_batches(self) -> list[StoredBatch]:
        stored = [
            self._load_commit(ref.removeprefix(BATCHES), commit)
            for ref, commit in sorted(self.refs.list(BATCHES).items())
        ]
        return sorted(stored, key=lambda batch: (batch.state.created_at, batch.state.batch_id))

    def batches_of(self, slug: str) -> list[StoredBatch]:
        return [batch for batch in self.all_batches() if batch.state.initiative_slug == slug]

    def active(self, slug: str) -> StoredBatch | None:
        """The newest batch of `slug` that is not terminal."""
        live = [b for b in self.batches_of(slug) if not b.state.batch_state.is_terminal]
        return live[-1] if live else None

    def write(
        self,
        previous: StoredBatch | None,
        state: BatchRunState,
        report: BatchRunReport,
        cache: CheckCache,
        also: Sequence[RefUpdate] = (),
    ) -> StoredBatch:
        """Append a state commit and move its ref (and `also`) in one CAS."""
        prepared = self.prepare(previous, state, report, cache)
        # The state comes last: a writer killed while git commits the transaction ref by ref
        # can only leave the other refs (the batch branch) ahead of the state, which the next
        # pass recovers (an integration it finds on the branch is adopted, SPEC §5.2 step 3).
        self.refs.compare_and_swap([*also, prepared.update])
        return prepared.stored

    def prepare(
        self,
        previous: StoredBatch | None,
        state: BatchRunState,
        report: BatchRunReport,
        cache: CheckCache,
    ) -> PreparedState:
        """The state commit and the ref update that would record it, written by a later CAS
        (together with another batch's state, when one batch continues another)."""
        valid = _revalidate(state)
        repo = self.refs.repo
        tree = repo.write_tree(
            {
                "state.json": canonical_model_text(valid),
                "report.json": canonical_model_text(report),
                "checks.json": canonical_model_text(cache),
            }
        )
        stamp = _git_date(valid.updated_at)
        commit = repo.commit_tree(
            tree,
            [previous.commit] if previous else [],
            f"imm state {valid.batch_id}: {valid.batch_state}\n",
            author=IMM_IDENTITY,
            author_date=stamp,
            committer_date=stamp,
        )
        update = RefUpdate(
            batch_state_ref(valid.batch_id), commit, previous.commit if previous else None
        )
        return PreparedState(StoredBatch(valid, report, cache, commit), update)

    def _load_commit(self, batch_id: str, commit: str) -> StoredBatch:
        repo = self.refs.repo
        texts = {
            name: repo.read_file(commit, name)
            for name in ("state.json", "report.json", "checks.json")
        }
        where = f"state of batch {batch_id} (commit {commit[:12]})"
        if texts["state.json"] is None:
            raise CorruptStateError(f"{where} has no state.json")
        try:
            state = BatchRunState.model_validate_json(texts["state.json"])
            report = (
                BatchRunReport.model_validate_json(texts["report.json"])
                if texts["report.json"]
                else None
            )
            cache = (
                CheckCache.model_validate_json(texts["checks.json"])
                if texts["checks.json"]
                else CheckCache()
            )
        except ValidationError as error:
            raise CorruptStateError(f"{where} is invalid: {error}") from None
        if state.batch_id != batch_id:
            raise CorruptStateError(f"{where} carries batch_id {state.batch_id}")
        return StoredBatch(state, report, cache, commit)


def _revalidate(state: BatchRunState) -> BatchRunState:
    """States are changed with `model_copy`, which skips validation; check every invariant
    again before anything is written."""
    return BatchRunState.model_validate_json(
        json.dumps(state.model_dump(mode="json", by_alias=True))
    )


def _git_date(timestamp: str) -> str:
    """`2026-12-02T10:00:00.000Z` -> git's raw `1796205600 +0000`."""
    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return f"{int(moment.timestamp())} +0000"
