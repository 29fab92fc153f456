"""A lane's limit (`lane_timeout_minutes`) covers all its commands together, and on GitHub the
lane job's limit leaves imm's own room to fire first (issue 31, decision 0050)."""

from __future__ import annotations

import io
import os
import shlex
from pathlib import Path

from imm_action.actions.runtime import lane_job_minutes, lane_minutes_on_github
from imm_action.git.refs import LocalRefStore
from imm_action.git.repo import GitRepo
from imm_action.lanes.run import LaneSpec, run_lane
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache
from tests.batch_helpers import make_project
from tests.conftest import git


def _lane(tmp_path: Path, lane_setup: str, executor: str, timeout_s: float) -> dict[str, object]:
    repo_path = make_project(tmp_path / "r", {"a": []})
    repo = GitRepo(repo_path)
    spec = LaneSpec(
        slug="init", batch_id="batch-x", task_id="a", slice_id="s-a",
        base_head=git(repo_path, "rev-parse", "HEAD").strip(), attempt=0, qa_failure_limit=1,
        executor=executor, lane_setup=lane_setup, timeout_s=timeout_s,
    )  # fmt: skip
    try:
        result = run_lane(
            spec, LocalRefStore(repo), Verifier(repo, ResultCache(), path_env=os.environ["PATH"]),
            environment=os.environ, log=io.StringIO(), git_date=lambda: "1700000000 +0000",
        )  # fmt: skip
    finally:
        repo.close()  # its cat-file, which the collector would otherwise find still running
    return result.outcome.model_dump(mode="json")


def test_the_lane_limit_counts_lane_setup_and_the_executor_together(tmp_path: Path) -> None:
    """Each would end within the limit alone; together they pass it, and the lane is parked
    with the command that was running, not given the whole limit again for each command."""
    executor = shlex.join(["sh", "-c", "sleep 2; echo a > a.txt"])
    outcome = _lane(tmp_path, "sleep 2", executor, timeout_s=3.0)
    assert outcome["state"] == "needs_human"
    assert str(outcome["reason"]).startswith("executor timed out after 3 s")
    [failure] = outcome["failures"]  # type: ignore[misc]
    assert failure["step"] == "executor"


def test_a_lane_within_its_limit_settles(tmp_path: Path) -> None:
    executor = shlex.join(["sh", "-c", "echo a > a.txt"])
    outcome = _lane(tmp_path, "true", executor, timeout_s=30.0)
    assert outcome["state"] == "settled"


def test_the_lane_job_limit_is_the_lanes_plus_the_margin() -> None:
    assert (lane_minutes_on_github(60), lane_job_minutes(60)) == (60, 75)
    assert (lane_minutes_on_github(1), lane_job_minutes(1)) == (1, 16)


def test_on_github_the_lanes_limit_shrinks_so_the_job_stays_within_six_hours() -> None:
    assert (lane_minutes_on_github(360), lane_job_minutes(360)) == (345, 360)
    assert (lane_minutes_on_github(350), lane_job_minutes(350)) == (345, 360)
