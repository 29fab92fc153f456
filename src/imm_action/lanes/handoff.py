"""A lane job in steps, so no step after the executor's holds a token that can write (SPEC §7):
fetch (read token) → work (no token; the outcome's ref moves are written down) → bundle (no
token: a git bundle of those refs, which the integrate job imports, ADR 0026). `publish` (push
the hand-off with a token) is kept for manual use; the shipped workflow no longer runs it.

The hand-off file lies where the executor could have written it, so publish and bundle trust
nothing in it but object ids, and the integrator holds a bundle to the same rules
(`check_lane_refs`): only this lane's two refs, and only an outcome commit that parses as this
lane's outcome. The integrator re-checks the lane commit anyway (lanes are untrusted, §5.4).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.git.refs import RemoteRefStore
from imm_action.git.repo import GitRepo, RefUpdate
from imm_action.git.runner import GitRunner
from imm_action.lanes.outcome import read_outcome
from imm_action.model.outcome import LaneOutcome
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref

HANDOFF_FILE = "imm-lane-publish.json"


def handoff_path(git_dir: Path, batch_id: str, task_id: str) -> Path:
    return git_dir / f"{batch_id}.{task_id}.{HANDOFF_FILE}"


class DeferredRefStore:
    """The work step's refs: what the fetch step mirrored from the remote; a CAS is written
    to the hand-off file for the publish step instead of being pushed."""

    def __init__(self, remote: RemoteRefStore, handoff: Path) -> None:
        self.repo = remote.repo
        self._remote = remote
        self._handoff = handoff

    def refresh(self) -> None:
        return None  # the fetch step did it; this step has no token

    def read(self, names: Iterable[str]) -> dict[str, str | None]:
        return self._remote.read(names)

    def list(self, prefix: str) -> dict[str, str]:
        return self._remote.list(prefix)

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        data = [{"ref": u.ref, "new": u.new, "old": u.old} for u in updates]
        self._handoff.write_text(json.dumps(data), encoding="utf-8")


def publish_handoff(
    remote: RemoteRefStore, handoff: Path, slug: str, batch_id: str, task_id: str
) -> str:
    """Push what the work step wrote down, in one atomic push; returns the outcome commit."""
    updates = read_handoff(handoff, slug, batch_id, task_id)
    check_lane_refs(remote.repo, {u.ref: u.new for u in updates}, slug, batch_id, task_id)
    remote.compare_and_swap(updates)
    handoff.unlink()
    return next(u.new for u in updates if u.ref == lane_outcome_ref(batch_id, task_id) and u.new)


def read_handoff(handoff: Path, slug: str, batch_id: str, task_id: str) -> list[RefUpdate]:
    """The ref moves the work step wrote down; only this lane's two refs may be named."""
    if not handoff.is_file():
        raise UsageError(
            f"lane {task_id} published nothing: its work step ended before writing an outcome"
        )
    allowed = set(lane_refs(slug, batch_id, task_id))
    return _updates(handoff.read_text(encoding="utf-8"), allowed)


def lane_refs(slug: str, batch_id: str, task_id: str) -> tuple[str, str]:
    """The only refs a lane hands off: its outcome ref and its lane branch."""
    return lane_outcome_ref(batch_id, task_id), heads(lane_branch(slug, task_id))


def check_lane_ref_names(names: Iterable[str], slug: str, batch_id: str, task_id: str) -> None:
    """Only this lane's outcome ref and lane branch may be named."""
    extra = sorted(set(names) - set(lane_refs(slug, batch_id, task_id)))
    if extra:
        raise UsageError(f"lane {task_id}: names a ref it may not move: {extra[0]}")


def check_lane_refs(
    repo: GitRepo, moves: Mapping[str, str | None], slug: str, batch_id: str, task_id: str
) -> LaneOutcome:
    """The publish rules, for moves read from anywhere a lane could have written: only this
    lane's outcome ref and lane branch; the outcome commit parses as this lane's outcome; the
    lane branch (when moved) points at the outcome's lane commit. Returns the outcome."""
    check_lane_ref_names(moves, slug, batch_id, task_id)
    outcome_ref, branch_ref = lane_refs(slug, batch_id, task_id)
    commit = moves.get(outcome_ref)
    if commit is None:
        raise UsageError(f"lane {task_id}: the hand-off holds no outcome")
    outcome = read_outcome(repo, commit)
    if outcome is None or (outcome.batch_id, outcome.task_id) != (batch_id, task_id):
        raise UsageError(f"lane {task_id}: the hand-off's outcome is not this lane's")
    if branch_ref in moves and moves[branch_ref] != outcome.lane_commit:
        raise UsageError(f"lane {task_id}: the hand-off moves the lane branch elsewhere")
    return outcome


def write_lane_bundle(
    repo: GitRepo, updates: Sequence[RefUpdate], bundle: Path, exclude: Sequence[str]
) -> None:
    """A git bundle of exactly the hand-off's refs (at their new ids), without what the
    integrator already has (`exclude`, the lane base). Made in a scratch bare repository that
    borrows `repo`'s objects, so no ref of `repo` is written."""
    bundle.parent.mkdir(parents=True, exist_ok=True)
    bundle.unlink(missing_ok=True)
    moved = [u for u in updates if u.new is not None]
    with tempfile.TemporaryDirectory(prefix="imm-bundle-") as scratch:
        GitRunner(Path(scratch)).run(["init", "-q", "--bare", scratch])
        alternates = Path(scratch) / "objects" / "info" / "alternates"
        alternates.write_text(f"{repo.objects_directory()}\n", encoding="utf-8")
        shallow = repo.common_directory() / "shallow"  # a depth-1 checkout: where history ends
        if shallow.is_file():
            shutil.copyfile(shallow, Path(scratch) / "shallow")
        git = GitRunner(Path(scratch))
        for update in moved:
            git.run(["update-ref", update.ref, str(update.new)])
        present = [oid for oid in exclude if repo.resolve(f"{oid}^{{commit}}")]
        git.run(["bundle", "create", str(bundle), *(u.ref for u in moved),
                 *(f"^{oid}" for oid in present)])  # fmt: skip


def _updates(text: str, allowed: set[str]) -> list[RefUpdate]:
    try:
        raw = json.loads(text)
        updates = [RefUpdate(str(i["ref"]), i["new"], i["old"]) for i in raw]
    except (ValueError, TypeError, KeyError):
        raise UsageError("the lane hand-off file is unreadable") from None
    for update in updates:
        if update.ref not in allowed:
            raise UsageError(f"the lane hand-off names a ref it may not move: {update.ref}")
        for oid in (update.new, update.old):
            if oid is not None and not (isinstance(oid, str) and len(oid) == 40):
                raise UsageError("the lane hand-off holds an invalid object id")
    return updates
