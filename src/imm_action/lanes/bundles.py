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

from collections.abc import Sequence
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
    """Import every `*.bundle` under `directory` (none when it does not exist), in name order."""
    if not directory.is_dir():
        return []
    notes = []
    for path in sorted(directory.rglob(f"*{BUNDLE_SUFFIX}")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            task_id, note = _import(refs, path, state)
            notes.append(BundleNote(path, task_id, True, note))
        except _Refused as refused:
            task = refused.args[1] if len(refused.args) > 1 else None
            notes.append(BundleNote(path, task, False, str(refused.args[0])))
    return notes


def _import(refs: RemoteRefStore, path: Path, state: BatchRunState) -> tuple[str, str]:
    repo = refs.repo
    heads = _heads(refs, path)
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
    slug = state.initiative_slug
    outcome_ref = lane_outcome_ref(state.batch_id, task_id)
    # The ref names first: a bundle naming any other ref is refused before its objects are read.
    try:
        check_lane_ref_names(heads, slug, state.batch_id, task_id)
        _index_strictly(refs, path)
        outcome = check_lane_refs(repo, dict(heads), slug, state.batch_id, task_id)
    except (UsageError, GitError) as error:
        raise _Refused(_one_line(error), task_id) from None
    if outcome.attempt != child.attempts:
        raise _Refused(
            f"its outcome is of attempt {outcome.attempt}, the lane is at attempt {child.attempts}",
            task_id,
        )
    current = refs.read(heads)
    if current[outcome_ref] == heads[outcome_ref]:
        return task_id, "already published"
    published = current[outcome_ref]
    if published is not None:
        earlier = read_outcome(repo, published)
        if earlier is not None and earlier.attempt == child.attempts:
            raise _Refused(f"an outcome of attempt {child.attempts} is already published", task_id)
    updates = [RefUpdate(ref, oid, current[ref]) for ref, oid in sorted(heads.items())]
    try:
        refs.compare_and_swap(updates)
    except GitConflict:
        raise _Refused("its refs moved on the remote meanwhile", task_id) from None
    except GitError as error:
        raise _Refused(f"the push was refused: {_one_line(error)}", task_id) from None
    return task_id, f"its outcome of attempt {outcome.attempt} ({outcome.state}) is pushed"


def _heads(refs: RemoteRefStore, path: Path) -> dict[str, str]:
    """The refs a bundle carries (`git bundle list-heads`), each named once."""
    _check_header(path)
    try:
        listed = refs.repo.git.output(["bundle", "list-heads", str(path)])
    except GitError as error:
        raise _Refused(f"not a readable git bundle: {_one_line(error)}") from None
    heads: dict[str, str] = {}
    for line in listed.splitlines():
        oid, _, ref = line.partition(" ")
        if not ref.startswith("refs/") or ref in heads or len(oid) not in (40, 64):
            raise _Refused(f"holds a head it may not: {line[:200]!r}")
        heads[ref] = oid
    return heads


def _check_header(path: Path) -> None:
    with path.open("rb") as handle:
        head = handle.read(_MAX_HEADER)
    if not head.startswith(_SIGNATURES):
        raise _Refused("not a git bundle (v2 or v3)")
    end = head.find(b"\n\n")
    if end < 0 or not head[end + 2 :].startswith(b"PACK"):
        raise _Refused("not a git bundle (no pack after its header)")
    if any(line.startswith(b"@filter") for line in head[:end].split(b"\n")):
        raise _Refused("a filtered (partial) bundle")


def _index_strictly(refs: RemoteRefStore, path: Path) -> None:
    """Its objects into the repository, every one checked (`index-pack --strict`, what
    receive-pack does with fsck on); its prerequisites must be here (`git bundle verify`)."""
    git = refs.repo.git
    git.run(["bundle", "verify", str(path)])
    with path.open("rb") as handle:
        head = handle.read(_MAX_HEADER)
        handle.seek(head.find(b"\n\n") + 2)
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
