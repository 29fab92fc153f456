"""The act world's own promises, without act: a scenario whose premise breaks fails at once,
saying why (ADR 0064, fifth turn)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.act_world import REPO, ActWorld

NOT_A_RUN = 999  # the fake GitHub holds no such run: the world reports no job to it


@pytest.fixture
def act_stand_in(world: ActWorld) -> Iterator[subprocess.Popen[bytes]]:
    """What the world kills when it ends a run, as its act: a process group of its own."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    world._act = process  # type: ignore[assignment]
    yield process
    process.kill()
    process.wait()


# t00's lane job succeeded, t01's started: the scenario's first lanes, as act logs them
FIRST_LANE_DONE = (
    "[imm-batch/imm lane t00-1] ⭐ Run Set up job",
    "[imm-batch/imm lane t00-1] 🏁  Job succeeded",
    "[imm-batch/imm lane t01-2] ⭐ Run Set up job",
)


def _log(world: ActWorld, *lines: str) -> None:
    """Lines of act's log, as the world reads them while act runs."""
    if REPO not in world.github.state.repos:
        world.github.add_repo(REPO)
    jobs: dict[str, str] = {}
    for line in lines:
        world._observe(line + "\n", NOT_A_RUN, jobs)


def test_a_lane_failing_before_the_lanes_a_scenario_waits_for_ends_the_run_naming_its_step(
    world: ActWorld, act_stand_in: subprocess.Popen[bytes]
) -> None:
    world.kill_run_after_lanes = 2
    _log(
        world,
        *FIRST_LANE_DONE,
        "[imm-batch/imm lane t01-2]   ❌  Failure - Main Fetch the lane's batch",
        "[imm-batch/imm lane t01-2]   ❌  Failure - Main Bundle the lane",
        "[imm-batch/imm lane t01-2] 🏁  Job failed",
    )
    assert act_stand_in.wait(10) < 0  # killed, not left to act's limit
    assert world._broken_premise is not None
    assert "imm lane t01 failed (Failure - Main Fetch the lane's batch)" in world._broken_premise
    assert "needed 2 lane jobs to succeed first (1 had)" in world._broken_premise


def test_a_lane_failing_once_the_wanted_lanes_succeeded_is_the_scenarios_own(
    world: ActWorld, act_stand_in: subprocess.Popen[bytes]
) -> None:
    world.cancel_after_lanes = 1
    _log(
        world,
        *FIRST_LANE_DONE,
        "[imm-batch/imm lane t01-2]   ❌  Failure - Main imm lane",
        "[imm-batch/imm lane t01-2] 🏁  Job failed",
    )
    assert world._broken_premise is None
    assert act_stand_in.poll() is None
