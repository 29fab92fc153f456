"""The batch state in git: one blob per child, so a write costs what changed (issue 13)."""

from __future__ import annotations

from pathlib import Path

from imm_action.git.repo import IMM_IDENTITY, RefUpdate
from imm_action.integrate.store import StateStore, forget_read_states
from imm_action.model.common import canonical_model_text
from imm_action.model.refs import batch_state_ref
from imm_action.model.state import ChildState
from tests.batch_helpers import make_project, open_local, run_pass
from tests.conftest import git

TASKS = {f"t{index}": [] for index in range(6)}


def started_batch(tmp_path: Path) -> tuple[Path, StateStore]:
    repo = make_project(tmp_path / "repo", TASKS)
    run_pass(repo, admit=False)
    return repo, StateStore(open_local(repo).refs)


def test_a_write_that_changes_two_children_writes_only_their_blobs(tmp_path: Path) -> None:
    repo, store = started_batch(tmp_path)
    [stored] = store.all_batches()
    children = list(stored.state.children)
    for index in (1, 4):
        children[index] = children[index].model_copy(update={"reason": "looked at"})
    state = stored.state.model_copy(update={"children": children})
    assert stored.report is not None
    written = store.write(stored, state, stored.report, stored.cache)
    changed = git(repo, "diff-tree", "-r", "--name-only", "--no-commit-id", stored.commit,
                  written.commit).split()  # fmt: skip
    child_files = sorted(
        path.rsplit("/", 1)[-1] for path in changed if path.startswith("children/")
    )
    assert child_files == ["t1.json", "t4.json"]


def test_a_state_reads_back_equal_from_git_alone(tmp_path: Path) -> None:
    _repo, store = started_batch(tmp_path)
    [written] = store.all_batches()
    forget_read_states()
    [read] = store.all_batches()
    assert (read.state, read.report, read.cache) == (written.state, written.report, written.cache)


def test_an_invalid_child_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    repo, store = started_batch(tmp_path)
    [stored] = store.all_batches()
    broken = stored.state.children[0].model_copy(update={"state": ChildState.INTEGRATED})
    state = stored.state.model_copy(update={"children": [broken, *stored.state.children[1:]]})
    assert stored.report is not None
    try:
        store.write(stored, state, stored.report, stored.cache)
    except ValueError as error:
        assert "without a lane" in str(error)
    else:
        raise AssertionError("an integrated child without a lane was written")
    assert git(repo, "rev-parse", batch_state_ref(stored.state.batch_id)).strip() == stored.commit


def test_a_state_commit_of_the_first_layout_is_still_read(tmp_path: Path) -> None:
    _repo, store = started_batch(tmp_path)
    [stored] = store.all_batches()
    assert stored.report is not None
    repo = store.refs.repo
    tree = repo.write_tree(
        {
            "state.json": canonical_model_text(stored.state),
            "report.json": canonical_model_text(stored.report),
            "checks.json": canonical_model_text(stored.cache),
        }
    )
    date = "1700000000 +0000"
    old = repo.commit_tree(tree, [], "old layout\n", author=IMM_IDENTITY, author_date=date,
                           committer_date=date)  # fmt: skip
    ref = batch_state_ref(stored.state.batch_id)
    repo.compare_and_swap([RefUpdate(ref, old, stored.commit)])
    read = store.load(stored.state.batch_id)
    assert read is not None
    assert (read.state, read.report, read.commit) == (stored.state, stored.report, old)
