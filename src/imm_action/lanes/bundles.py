"""The integrate job's side of a lane job's bundle (ADR 0026): lane jobs hold no token that can
write, so each uploads its outcome ref and lane branch as a git bundle, and the integrate job
imports them here before its pass.

A bundle is untrusted input (an executor ran on the machine that made it, and could have
uploaded one under any name): its objects are indexed with `--strict` (fsck), and it is held to
the publish rules (`check_lane_refs`) for an admitted lane of this batch, at that lane's current
attempt. Anything else is ignored, with a note saying why; nothing of it is pushed. What is
imported is pushed with leases, and the pass re-checks every lane commit at integration anyway.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.git import GitError
from imm_action.git.errors import GitConflict
from imm_action.git.refs import RemoteRefStore
from imm_action.git.repo import RefUpdate
from imm_action.lanes.handoff import check_lane_ref_names, check_lane_refs
from imm_action.lanes.outcome import read_outcome
from imm_action.model.refs import lane_outcome_ref
from imm_action.model.state import BatchRunState, ChildState

BUNDLE_SUFFIX = ".bundle"
_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_MAX_HEADER = 64 * 1024
_UNPACK_LIMIT = 100  # git's default transfer.unpackLimit


def lane_artifact_name(batch_id: str, task_id: str, attempt: int) -> str:
    """The artifact a lane job uploads its bundle as; the integrate job downloads
    `imm-lane-<batch id>-*` (the name is only a convenience: the bundle's refs are checked)."""
    return f"{lane_artifact_prefix(batch_id)}{task_id}-{attempt}"


def lane_artifact_prefix(batch_id: str) -> str:
    return f"imm-lane-{batch_id}-"


@dataclass(frozen=True)
class BundleNote:
    """What became of one bundle file: imported (its outcome pushed) or ignored, and why."""

    path: Path
    task_id: str | None
    imported: bool
    note: str


class _Refused(Exception):
    """A bundle that is not imported; the message says why."""


def import_lane_bundles(
    refs: RemoteRefStore, directory: Path, state: BatchRunState
) -> list[BundleNote]:
    """Import every `*.bundle` under `directory` (none when it does not exist), in name order:
    each is read and checked on its own (one per core at once: git's object checks are most of it),
    then everything accepted goes to the remote in one atomic push (a push per bundle took three
    quarters of the integrate job at 256 lanes)."""
    if not directory.is_dir():
        return []
    paths = [path for path in sorted(directory.rglob(f"*{BUNDLE_SUFFIX}"))
             if path.is_file() and not path.is_symlink()]  # fmt: skip

    def accept(path: Path) -> _Accepted | BundleNote:
        try:
            return _accept(refs, path, state)
        except _Refused as refused:
            return _refused_note(path, refused)

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        read = list(pool.map(accept, paths))
    notes = {item.path: item for item in read if isinstance(item, BundleNote)}
    accepted = [item for item in read if isinstance(item, _Accepted)]
    for found, note in _publish(refs, accepted, state).items():
        notes[found.path] = note
    return [notes[path] for path in sorted(notes)]


@dataclass(frozen=True, eq=False)  # each bundle is itself, whatever it holds
class _Accepted:
    """A bundle whose objects are in and whose refs follow the publish rules."""

    path: Path
    task_id: str
    heads: dict[str, str]
    attempt: int
    outcome_state: str


def _accept(refs: RemoteRefStore, path: Path, state: BatchRunState) -> _Accepted:
    repo = refs.repo
    heads, prerequisites = _read_header(path)
    prefix = lane_outcome_ref(state.batch_id, "")
    tasks = sorted({ref.removeprefix(prefix) for ref in heads if ref.startswith(prefix)})
    if len(tasks) != 1:
        found = "no outcome" if not tasks else f"outcomes of {', '.join(tasks)}"
        raise _Refused(f"holds {found} of batch {state.batch_id}")
    task_id = tasks[0]
    child = next((c for c in state.children if c.task_id == task_id), None)
    if child is None or child.state is not ChildState.LANE_ADMITTED or child.lane is None:
        now = "not in the batch" if child is None else str(child.state)
        raise _Refused(f"task {task_id} is {now}, not an admitted lane", task_id)
    # The ref names first: a bundle naming any other ref is refused before its objects are read.
    try:
        check_lane_ref_names(heads, state.initiative_slug, state.batch_id, task_id)
        _index_strictly(refs, path, prerequisites)
        outcome = check_lane_refs(repo, dict(heads), state.initiative_slug, state.batch_id,
                                  task_id)  # fmt: skip
    except (UsageError, GitError) as error:
        raise _Refused(_one_line(error), task_id) from None
    except _Refused as refused:
        raise _Refused(refused.args[0], task_id) from None
    if outcome.attempt != child.attempts:
        raise _Refused(
            f"its outcome is of attempt {outcome.attempt}, the lane is at attempt {child.attempts}",
            task_id,
        )
    return _Accepted(path, task_id, heads, outcome.attempt, str(outcome.state))


def _publish(
    refs: RemoteRefStore, accepted: Sequence[_Accepted], state: BatchRunState
) -> dict[_Accepted, BundleNote]:
    """Push what is accepted and new, all in one atomic push with a lease on every ref; when the
    remote refuses it (a ref moved meanwhile), each bundle alone, so one refusal costs no other
    lane its import."""
    notes: dict[_Accepted, BundleNote] = {}
    current = refs.read(sorted({ref for found in accepted for ref in found.heads}))
    moving: list[_Accepted] = []
    for found in accepted:
        outcome_ref = lane_outcome_ref(state.batch_id, found.task_id)
        if current[outcome_ref] == found.heads[outcome_ref]:
            notes[found] = _note(found, True, "already published")
            continue
        published = current[outcome_ref]
        earlier = read_outcome(refs.repo, published) if published is not None else None
        if any(other.task_id == found.task_id for other in moving) or (
            earlier is not None and earlier.attempt == found.attempt
        ):
            why = f"an outcome of attempt {found.attempt} is already published"
            notes[found] = _note(found, False, why)
            continue
        moving.append(found)
    if not moving:
        return notes
    try:
        refs.compare_and_swap([u for found in moving for u in _updates(found, current)])
    except GitError:
        refs.refresh()
        for found in moving:
            notes[found] = _push_alone(refs, found)
        return notes
    for found in moving:
        notes[found] = _note(found, True, _pushed(found))
    return notes


def _push_alone(refs: RemoteRefStore, found: _Accepted) -> BundleNote:
    current = refs.read(sorted(found.heads))
    try:
        refs.compare_and_swap(_updates(found, current))
    except GitConflict:
        return _note(found, False, "its refs moved on the remote meanwhile")
    except GitError as error:
        return _note(found, False, f"the push was refused: {_one_line(error)}")
    return _note(found, True, _pushed(found))


def _updates(found: _Accepted, current: dict[str, str | None]) -> list[RefUpdate]:
    return [RefUpdate(ref, oid, current[ref]) for ref, oid in sorted(found.heads.items())]


def _pushed(found: _Accepted) -> str:
    return f"its outcome of attempt {found.attempt} ({found.outcome_state}) is pushed"


def _note(found: _Accepted, imported: bool, note: str) -> BundleNote:
    return BundleNote(found.path, found.task_id, imported, note)


def _refused_note(path: Path, refused: _Refused) -> BundleNote:
    task = refused.args[1] if len(refused.args) > 1 else None
    return BundleNote(path, task, False, str(refused.args[0]))


def _read_header(path: Path) -> tuple[dict[str, str], list[str]]:
    """The refs a bundle carries, each named once, and the commits it needs (its header, read
    here rather than by a `git bundle` process per bundle)."""
    header = _check_header(path)
    heads: dict[str, str] = {}
    prerequisites: list[str] = []
    for raw in header.split(b"\n")[1:]:
        line = raw.decode("utf-8", "replace")
        if line.startswith("@"):  # a v3 capability (a filter is refused in _check_header)
            continue
        if line.startswith("-"):
            oid = line[1:].split(" ", 1)[0]
            if not _is_oid(oid):
                raise _Refused(f"holds a prerequisite it may not: {line[:200]!r}")
            prerequisites.append(oid)
            continue
        oid, _, ref = line.partition(" ")
        if not ref.startswith("refs/") or ref in heads or not _is_oid(oid):
            raise _Refused(f"holds a head it may not: {line[:200]!r}")
        heads[ref] = oid
    return heads, prerequisites


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _check_header(path: Path) -> bytes:
    """The header (signature line to the last ref line) of a complete v2 or v3 bundle."""
    with path.open("rb") as handle:
        head = handle.read(_MAX_HEADER)
    if not head.startswith(_SIGNATURES):
        raise _Refused("not a git bundle (v2 or v3)")
    end = head.find(b"\n\n")
    if end < 0 or not head[end + 2 :].startswith(b"PACK"):
        raise _Refused("not a git bundle (no pack after its header)")
    if any(line.startswith(b"@filter") for line in head[:end].split(b"\n")):
        raise _Refused("a filtered (partial) bundle")
    return head[:end]


def _index_strictly(refs: RemoteRefStore, path: Path, prerequisites: Sequence[str]) -> None:
    """Its objects into the repository, every one checked (`--strict`: what receive-pack does
    with fsck on); the commits it needs must be here. As receive-pack does (its default
    `transfer.unpackLimit`), a pack of fewer than 100 objects is written as loose objects and a
    larger one kept as a pack: every later git process opens every pack, and 256 one-commit
    packs made each of the pass's `merge-tree` four times slower."""
    repo = refs.repo
    missing = [oid for oid in prerequisites if repo.commit_if_present(oid) is None]
    if missing:
        raise _Refused(f"needs commit {missing[0]}, which the repository does not have")
    git = repo.git
    with path.open("rb") as handle:
        head = handle.read(_MAX_HEADER)
        start = head.find(b"\n\n") + 2
        objects = int.from_bytes(head[start + 8 : start + 12], "big")  # PACK, version, count
        handle.seek(start)
        if objects < _UNPACK_LIMIT:
            git.run_reading(["unpack-objects", "-q", "--strict"], handle)
        else:
            git.run_reading(["index-pack", "--stdin", "--fix-thin", "--strict"], handle)


def _one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[-1][:300] if text else type(error).__name__


def summary_of(notes: Sequence[BundleNote]) -> str:
    """The job summary's section on the lane bundles this pass read."""
    if not notes:
        return ""
    lines = ["### Lane bundles", ""]
    for note in notes:
        verdict = "imported" if note.imported else "**ignored**"
        task = f"`{note.task_id}`" if note.task_id else "(no task)"
        where = _plain(f"{note.path.parent.name}/{note.path.name}")
        lines.append(f"- {task} `{where}`: {verdict}: {_plain(note.note)}")
    return "\n".join(lines) + "\n"


def describe(note: BundleNote) -> str:
    """One log line for a bundle."""
    verdict = "imported" if note.imported else "ignored"
    where = f"{note.path.parent.name}/{note.path.name}"
    return f"lane bundle {where!r} ({note.task_id or 'no task'}): {verdict}: {note.note}"


def _plain(text: str) -> str:
    """Bundle and artifact names are chosen by whoever uploaded them: no markup, one line."""
    return " ".join(text.replace("`", "'").split())
