"""Races: four coordinators run the pass on the same batch at once — in one repository and
through a bare remote — and the batch still ends valid, with nothing lost or doubled."""

from __future__ import annotations

import multiprocessing
import subprocess
from pathlib import Path
from typing import Any

import pytest

from imm_action.model.state import ChildState
from tests.batch_helpers import current, make_lane_commit, make_project, publish, run_pass
from tests.conftest import git

TASKS = {"a": [], "b": [], "c": ["a"], "d": ["b", "c"], "e": []}
RACERS = 4


def _racer(repo: str, remote: str | None, barrier: Any, results: Any) -> None:
    log: list[str] = []
    debug: list[str] = []
    barrier.wait()
    result = run_pass(Path(repo), remote=remote, log=log, debug=debug)
    assert not [line for line in log if "lost a race" in line]  # normal: not said as a problem
    results.put((result.races_lost, [line for line in debug if "lost a race" in line]))


def _race(repos: list[Path], remote: str | None) -> tuple[int, list[str]]:
    # Each racer a process of its own, never a fork of this (threaded) test process: one fresh
    # server imports imm once and forks every round's racers (spawning them imported it anew,
    # 0.6 s of CPU each, about 35 times a run).
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    barrier = context.Barrier(len(repos))
    results = context.Queue()
    workers = [
        context.Process(target=_racer, args=(str(r), remote, barrier, results)) for r in repos
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    lost, said = 0, []
    for _ in workers:
        races, lines = results.get(timeout=5)
        lost += races
        said += lines
    return lost, said


def _do_admitted_lanes(coordinator: Path, lane_repo: Path, remote: str | None) -> None:
    stored = current(coordinator, remote=remote)
    for child in stored.state.children:
        if child.state is ChildState.LANE_ADMITTED:
            assert child.lane is not None
            if remote:
                git(
                    lane_repo,
                    "fetch",
                    "-q",
                    remote,
                    "+refs/heads/imm/init:refs/remotes/origin/imm/init",
                )
            commit = make_lane_commit(lane_repo, child.lane.base_head, child.task_id,
                                      {f"{child.task_id}.txt": f"{child.task_id}\n"},
                                      batch_id=stored.state.batch_id)  # fmt: skip
            publish(lane_repo, child.task_id, commit, remote=remote)


def _check_final(repo: Path, remote: str | None) -> None:
    stored = current(repo, remote=remote)
    assert stored.state.batch_state == "completed"
    branch = "refs/imm-mirror/refs/heads/imm/init" if remote else "imm/init"
    subjects = git(repo, "log", "--format=%s", branch).splitlines()
    for task in TASKS:
        assert sum(s.startswith(f"imm({task}):") for s in subjects) == 1
    history = git(repo, "log", "--format=%H", branch).split()[: len(TASKS)][::-1]
    assert stored.state.commits == history
    assert len(StateStoreCount.batches(repo, remote)) == 1  # the racing starts made one batch


class StateStoreCount:
    @staticmethod
    def batches(repo: Path, remote: str | None) -> list[object]:
        from imm_action.integrate.store import StateStore
        from tests.batch_helpers import open_local

        batch_repo = open_local(repo, remote)
        batch_repo.refs.refresh()
        return list(StateStore(batch_repo.refs).all_batches())


def _run_rounds(coordinators: list[Path], lane_repo: Path, remote: str | None) -> int:
    total_lost = 0
    for _ in range(10):
        lost, said = _race(coordinators, remote)
        assert len(said) == lost  # every retry is in the debug log
        total_lost += lost
        if current(coordinators[0], remote=remote).state.batch_state == "completed":
            return total_lost
        _do_admitted_lanes(coordinators[0], lane_repo, remote)
    pytest.fail("the batch did not complete in 10 rounds")


@pytest.mark.slow
def test_four_coordinators_racing_in_one_repository_lose_nothing(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", TASKS)
    lost = _run_rounds([repo] * RACERS, repo, None)
    _check_final(repo, None)
    assert lost >= 1  # they really raced: at least the start was contended


@pytest.mark.slow
def test_four_coordinators_racing_through_a_bare_remote_lose_nothing(tmp_path: Path) -> None:
    seed = make_project(tmp_path / "seed", TASKS)
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(origin)], check=True)
    clones = []
    for index in range(RACERS + 1):
        clone = tmp_path / f"clone{index}"
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        clones.append(clone)
    lost = _run_rounds(clones[:RACERS], clones[RACERS], "origin")
    _check_final(clones[0], "origin")
    assert lost >= 1
    # the remote itself holds the outcome: branch and state agree there too
    remote_head = git(origin, "rev-parse", "imm/init").strip()
    assert remote_head == current(clones[1], remote="origin").state.commits[-1]
