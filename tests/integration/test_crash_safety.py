"""Crash safety: the pass dies before and after every ref write it makes; the next pass
converges to exactly what an uninterrupted run produces, with no task integrated twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from imm_action.git.refs import LocalRefStore
from imm_action.git.repo import GitRepo, RefUpdate
from imm_action.model.state import ChildState
from tests.batch_helpers import branch_log, current, make_project, run_pass, work
from tests.conftest import GIT_ENV, git

TASKS = {"a": [], "b": [], "c": ["a"], "d": ["b", "c"]}


class SimulatedCrash(BaseException):
    """The process dies here (a BaseException, so no handler of ours can swallow it)."""


class CrashingRefStore(LocalRefStore):
    def __init__(self, repo: GitRepo, crash_at: int | None, when: str) -> None:
        super().__init__(repo)
        self.crash_at = crash_at
        self.when = when
        self.writes = 0

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        self.writes += 1
        if self.writes == self.crash_at and self.when == "before":
            raise SimulatedCrash
        super().compare_and_swap(updates)
        if self.writes == self.crash_at and self.when == "after":
            raise SimulatedCrash


@dataclass(frozen=True)
class Ending:
    tree: str
    commits: list[str]
    children: list[tuple[str, str, str | None]]
    batch_state: str
    pass_writes: int


def drive(repo: Path, crash_at: int | None = None, when: str = "before") -> Ending:
    """Run passes until the batch completes, doing each admitted lane's work in between."""
    store = CrashingRefStore(GitRepo(repo), crash_at, when)
    for _ in range(20):
        try:
            run_pass(repo, refs=store)
        except SimulatedCrash:
            continue  # the process died; the next pass starts from whatever the refs say
        stored = current(repo)
        if stored.state.batch_state == "completed":
            break
        for child in stored.state.children:
            outcome = f"refs/imm/lanes/{stored.state.batch_id}/{child.task_id}"
            if child.state is ChildState.LANE_ADMITTED and not _exists(repo, outcome):
                work(repo, child.task_id)
    stored = current(repo)
    return Ending(
        tree=git(repo, "rev-parse", "imm/init^{tree}").strip(),
        commits=stored.state.commits,
        children=[(c.task_id, str(c.state), c.commit) for c in stored.state.children],
        batch_state=str(stored.state.batch_state),
        pass_writes=store.writes,
    )


def _exists(repo: Path, ref: str) -> bool:
    return bool(git(repo, "for-each-ref", ref).strip())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Ending:
    with pytest.MonkeyPatch.context() as patch:  # module scope: the autouse pinning is not on yet
        for key, value in GIT_ENV.items():
            patch.setenv(key, value)
        repo = make_project(tmp_path_factory.mktemp("clean") / "r", TASKS)
        ending = drive(repo)
    assert ending.batch_state == "completed"
    return ending


def test_an_uninterrupted_run_integrates_every_task_once(uninterrupted: Ending) -> None:
    assert len(uninterrupted.commits) == len(TASKS)
    assert uninterrupted.pass_writes >= 6  # start, integrations and the admissions between


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_at_any_ref_write_converges_to_the_uninterrupted_result(
    tmp_path: Path, uninterrupted: Ending, when: str
) -> None:
    for crash_at in range(1, uninterrupted.pass_writes + 1):
        repo = make_project(tmp_path / f"{when}-{crash_at}", TASKS)
        ending = drive(repo, crash_at, when)
        where = f"crash {when} write {crash_at}"
        assert ending.batch_state == "completed", where
        assert ending.tree == uninterrupted.tree, where
        assert ending.commits == uninterrupted.commits, where
        assert ending.children == uninterrupted.children, where
        subjects = git(repo, "log", "--format=%s", "imm/init").splitlines()
        for task in TASKS:
            assert sum(s.startswith(f"imm({task}):") for s in subjects) == 1, where
        assert branch_log(repo)[: len(TASKS)][::-1] == ending.commits, where
