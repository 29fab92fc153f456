"""Batch state in git: a commit chain at `refs/imm/batches/<batch_id>` (SPEC §5.5).

Each commit's tree holds the state (`batch.json` and one blob per child under `children/`), the
report's own fields (`report-head.json`; the rest is derived from the state) and the
descriptor-result cache (one blob per result under `checks/`), so a write costs what changed,
not the size of the batch; the chain is the audit log. Commits of the first layout
(`state.json`, `report.json`, `checks.json`) are still read. Every write is a compare-and-swap
together with whatever other refs the same step moves (the batch branch), so they can never
disagree.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import ValidationError

from imm_action.errors import ImmError
from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, GitRepo, RefUpdate
from imm_action.integrate.state_tree import FanoutTree, make_tree
from imm_action.integrate.verdict import report_children
from imm_action.lanes.outcome import read_outcome
from imm_action.model.common import canonical_model_text
from imm_action.model.outcome import CachedCheck, CheckCache
from imm_action.model.refs import BATCHES, batch_state_ref, latest_batch_ref
from imm_action.model.report import BatchRunReport
from imm_action.model.state import (
    BatchChild,
    BatchRunState,
    flaky_in_repository,
    state_invariant_violations,
)


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
        # Per initiative, where its latest-batch ref pointed when this store first listed its
        # batches: a batch started from that view leases it (a store is one pass's view).
        self._latest_seen: dict[str, str | None] = {}

    def load(self, batch_id: str) -> StoredBatch | None:
        commit = self.refs.read([batch_state_ref(batch_id)])[batch_state_ref(batch_id)]
        return None if commit is None else self._load_commit(batch_id, commit)

    def all_batches(self) -> list[StoredBatch]:
        stored = [
            self._load_commit(ref.removeprefix(BATCHES), commit)
            for ref, commit in sorted(self.refs.list(BATCHES).items())
        ]
        return sorted(stored, key=lambda batch: (batch.state.created_at, batch.state.batch_id))

    def flaky_in_repository(self) -> dict[str, int]:
        """What a new batch starts knowing of flaky tests (issue 61): the flips the newest
        batches of the repository recorded (`model.state.flaky_in_repository`)."""
        return flaky_in_repository([batch.state for batch in self.all_batches()])

    def batches_of(self, slug: str) -> list[StoredBatch]:
        if slug not in self._latest_seen:  # before the listing: a batch started after this
            # read is either listed below or makes our own start lose its lease
            ref = latest_batch_ref(slug)
            self._latest_seen[slug] = self.refs.read([ref])[ref]
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
        *,
        also: Sequence[RefUpdate] = (),
        keep: Sequence[str] = (),
    ) -> StoredBatch:
        """Append a state commit and move its ref (and `also`) in one CAS. Only the children
        and check results that changed are written (one blob each, see `_Snapshot`). `keep`:
        commits the state commit holds as further parents (landed lanes' outcomes), so the
        chain reaches them once their refs are gone."""
        prepared, snapshot = self._prepare(previous, state, report, cache, keep)
        if previous is None:  # a new batch: the initiative's latest-batch ref moves with it
            slug = state.initiative_slug
            ref = latest_batch_ref(slug)
            seen = (
                self._latest_seen[slug] if slug in self._latest_seen else self.refs.read([ref])[ref]
            )
            also = [*also, RefUpdate(ref, prepared.stored.commit, seen)]
        # The state comes last: a writer killed while git commits the transaction ref by ref
        # can only leave the other refs (the batch branch) ahead of the state, which the next
        # pass recovers (an integration it finds on the branch is adopted, SPEC §5.2 step 3).
        self.refs.compare_and_swap([*also, prepared.update])
        _remember(prepared.stored.commit, prepared.stored, snapshot)
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
        return self._prepare(previous, state, report, cache, ())[0]

    def _prepare(
        self,
        previous: StoredBatch | None,
        state: BatchRunState,
        report: BatchRunReport,
        cache: CheckCache,
        keep: Sequence[str],
    ) -> tuple[PreparedState, _Snapshot]:
        repo = self.refs.repo
        before = _Snapshot.empty() if previous is None else self._snapshot(previous)
        snapshot = before.advance(repo, state, report, cache)
        stamp = _git_date(state.updated_at)
        commit = repo.commit_tree(
            snapshot.root,
            [*([previous.commit] if previous else []), *keep],
            f"imm state {state.batch_id}: {state.batch_state}\n",
            author=IMM_IDENTITY,
            author_date=stamp,
            committer_date=stamp,
        )
        update = RefUpdate(
            batch_state_ref(state.batch_id), commit, previous.commit if previous else None
        )
        return PreparedState(StoredBatch(state, report, cache, commit), update), snapshot

    def history(self, batch_id: str) -> list[StoredBatch]:
        """Every state the batch was in, oldest first: its audit log (SPEC §5.5)."""
        ref = batch_state_ref(batch_id)
        listing = self.refs.repo.git.run(["rev-list", "--first-parent", ref], ok_codes=(0, 128))
        return [self._load_commit(batch_id, commit) for commit in listing.stdout.split()[::-1]]

    def landed_outcomes(self, batch_id: str) -> dict[str, str]:
        """Task id -> the outcome commit its landing kept in the state chain."""
        ref = batch_state_ref(batch_id)
        listing = self.refs.repo.git.run(["rev-list", "--parents", ref], ok_codes=(0, 128))
        found: dict[str, str] = {}
        for line in listing.stdout.splitlines():
            for parent in line.split()[2:]:
                outcome = read_outcome(self.refs.repo, parent)
                if outcome is not None and outcome.batch_id == batch_id:
                    found.setdefault(outcome.task_id, parent)
        return found

    def _snapshot(self, stored: StoredBatch) -> _Snapshot:
        known = _SNAPSHOTS.get(stored.commit)
        if known is not None:
            return known[1]
        return _Snapshot.read(self.refs.repo, stored.commit)

    def _load_commit(self, batch_id: str, commit: str) -> StoredBatch:
        known = _SNAPSHOTS.get(commit)
        if known is not None:
            _SNAPSHOTS.move_to_end(commit)
            stored = known[0]
        else:
            stored = self._read_commit(batch_id, commit)
        if stored.state.batch_id != batch_id:
            where = f"state of batch {batch_id} (commit {commit[:12]})"
            raise CorruptStateError(f"{where} carries batch_id {stored.state.batch_id}")
        return stored

    def _read_commit(self, batch_id: str, commit: str) -> StoredBatch:
        repo = self.refs.repo
        where = f"state of batch {batch_id} (commit {commit[:12]})"
        try:
            if repo.read_file(commit, HEAD_FILE) is not None:
                return _Snapshot.read(repo, commit).stored(repo, commit)
            return self._read_single_files(repo, commit, where)
        except (ValidationError, ValueError) as error:
            raise CorruptStateError(f"{where} is invalid: {error}") from None

    def _read_single_files(self, repo: GitRepo, commit: str, where: str) -> StoredBatch:
        """The first layout: the whole state, report and cache in one file each."""
        texts = {
            name: repo.read_file(commit, name)
            for name in ("state.json", "report.json", "checks.json")
        }
        if texts["state.json"] is None:
            raise CorruptStateError(f"{where} has no state.json")
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
        return StoredBatch(state, report, cache, commit)


# -- the layout: one blob per child and per check result ---------------------------------------
HEAD_FILE = "batch.json"  # the state without its children, which it lists by id
REPORT_FILE = "report-head.json"  # the report without what the state says already
CHILDREN = "children"
CHECKS = "checks"
_SNAPSHOT_LIMIT = 8
# Commit id -> what it holds. A commit's content never changes, so this is never stale; it
# saves the writer from reading back what it wrote, and a forked lane from reading the state.
_SNAPSHOTS: OrderedDict[str, tuple[StoredBatch, _Snapshot]] = OrderedDict()
_SNAPSHOTS_LOCK = threading.Lock()


def _remember(commit: str, stored: StoredBatch, snapshot: _Snapshot) -> None:
    with _SNAPSHOTS_LOCK:
        _SNAPSHOTS[commit] = (stored, snapshot)
        _SNAPSHOTS.move_to_end(commit)
        while len(_SNAPSHOTS) > _SNAPSHOT_LIMIT:
            _SNAPSHOTS.popitem(last=False)


def forget_read_states() -> None:
    """Drop the states kept in memory (for a reader that must see only what git holds)."""
    with _SNAPSHOTS_LOCK:
        _SNAPSHOTS.clear()


def _check_name(tree: str, digest: str) -> str:
    return f"{tree}-{digest.removeprefix('sha256:')}.json"


@dataclass(frozen=True)
class _Snapshot:
    """A state commit's tree: `batch.json`, `report-head.json`, `children/a/b/<task>.json`
    and `checks/a/b/<tree>-<digest>.json`. `known` holds the child objects the blobs were
    written from, so the next write recognises unchanged children without serialising them."""

    children: FanoutTree
    checks: FanoutTree
    known: Mapping[str, BatchChild]
    root: str = ""

    @classmethod
    def empty(cls) -> _Snapshot:
        return cls(FanoutTree(), FanoutTree(), {})

    @classmethod
    def read(cls, repo: GitRepo, commit: str) -> _Snapshot:
        files = repo.list_blobs(commit)
        children = {p: o for p, o in files.items() if p.startswith(CHILDREN + "/")}
        checks = {p: o for p, o in files.items() if p.startswith(CHECKS + "/")}
        return cls(
            FanoutTree.from_listing(repo, children),
            FanoutTree.from_listing(repo, checks),
            {},
            repo.commit(commit).tree,
        )

    def advance(
        self, repo: GitRepo, state: BatchRunState, report: BatchRunReport, cache: CheckCache
    ) -> _Snapshot:
        """Write what changed since this snapshot; every changed child is validated again
        (states are changed with `model_copy`, which skips validation)."""
        changed: dict[str, str | None] = {}
        known: dict[str, BatchChild] = {}
        for child in state.children:
            name = f"{child.task_id}.json"
            earlier = self.known.get(child.task_id)
            if earlier is None or (earlier is not child and earlier != child):
                text = canonical_model_text(child).encode()
                if self.children.get(name) != repo.hash_object("blob", text):
                    BatchChild.model_validate_json(text)
                    changed[name] = repo.write_object("blob", text)
            known[child.task_id] = child
        _check_header(state)
        new_checks: dict[str, str | None] = {}
        kept: set[str] = set()
        for entry in cache.entries:
            name = _check_name(entry.tree, entry.descriptor_digest)
            kept.add(name)
            if self.checks.get(name) is None:
                new_checks[name] = repo.write_object("blob", canonical_model_text(entry).encode())
        # what the cache no longer holds goes: a check's pass on a tree the branch moved past
        new_checks.update((name, None) for name, _ in self.checks.files() if name not in kept)
        children = self.children.with_files(repo, changed)
        checks = self.checks.with_files(repo, new_checks)
        head = json.loads(state.model_dump_json(by_alias=True, exclude={"children"}))
        head[CHILDREN] = [child.task_id for child in state.children]
        report_head = report.model_dump(mode="json", exclude={"children", "commits"})
        entries: dict[str, tuple[Literal["blob", "tree"], str]] = {
            HEAD_FILE: ("blob", repo.write_object("blob", _json_text(head))),
            REPORT_FILE: ("blob", repo.write_object("blob", _json_text(report_head))),
        }
        if children.oid is None:  # the state's own validation holds a batch to one child or more
            raise ImmError(f"batch {state.batch_id} has no children to store")
        entries[CHILDREN] = ("tree", children.oid)
        if checks.oid is not None:
            entries[CHECKS] = ("tree", checks.oid)
        return _Snapshot(children, checks, known, make_tree(repo, entries))

    def stored(self, repo: GitRepo, commit: str) -> StoredBatch:
        """Everything the commit holds, read and validated."""
        head_text = repo.read_file(commit, HEAD_FILE)
        report_text = repo.read_file(commit, REPORT_FILE)
        if head_text is None:
            raise ValueError(f"no {HEAD_FILE}")
        head = json.loads(head_text)
        order = head.get(CHILDREN)
        if not isinstance(order, list):
            raise ValueError(f"{HEAD_FILE} lists no children")
        texts = []
        for task_id in order:
            oid = self.children.get(f"{task_id}.json")
            blob = repo.read_blob(oid) if oid else None
            if blob is None:
                raise ValueError(f"child {task_id} is missing")
            texts.append(json.loads(blob))
        head[CHILDREN] = texts
        state = BatchRunState.model_validate_json(json.dumps(head))
        entries = [
            CachedCheck.model_validate_json(repo.read_blob(oid) or b"")
            for _, oid in self.checks.files()
        ]
        entries.sort(key=lambda entry: (entry.tree, entry.descriptor_digest))
        report = None
        if report_text is not None:
            shell = {**json.loads(report_text), "children": [], "commits": []}
            report = BatchRunReport.model_validate_json(json.dumps(shell)).model_copy(
                update={"children": report_children(state), "commits": list(state.commits)}
            )
        known = {child.task_id: child for child in state.children}
        stored = StoredBatch(state, report, CheckCache(entries=entries), commit)
        _remember(commit, stored, _Snapshot(self.children, self.checks, known, self.root))
        return stored


def _check_header(state: BatchRunState) -> None:
    """The state's own fields validated again (with one child, so it costs the same at any
    size), then every invariant over all children."""
    head = json.loads(state.model_dump_json(by_alias=True, exclude={"children"}))
    head[CHILDREN] = [json.loads(state.children[0].model_dump_json(by_alias=True))]
    BatchRunState.model_validate_json(json.dumps(head))
    problems = state_invariant_violations(state)
    if problems:
        raise ValueError("; ".join(problems))


def _json_text(value: object) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _git_date(timestamp: str) -> str:
    """`2026-12-02T10:00:00.000Z` -> git's raw `1796205600 +0000`."""
    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return f"{int(moment.timestamp())} +0000"
