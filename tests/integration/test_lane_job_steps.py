"""A lane job in three steps (fetch with the token, work without it, publish with it): the
remote sees the outcome only after publish; a work step that died publishes nothing; publish
moves nothing but this lane's two refs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from imm_action.lanes.handoff import handoff_path
from imm_action.model.refs import lane_outcome_ref
from tests.batch_helpers import make_project, run_pass
from tests.conftest import git, run_cli

EXECUTOR = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'lane_executor.py'}"


@pytest.fixture
def lane_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """A remote with an admitted lane `a`, and a fresh clone of it (the lane job's checkout)."""
    project = make_project(tmp_path / "project", {"a": []})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    result = run_pass(project, remote="origin")
    job = tmp_path / "job"
    git(tmp_path, "clone", "-q", str(remote), str(job))
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "ok"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    return job, remote, result.stored.state.batch_id


def _lane(capsys: pytest.CaptureFixture[str], job: Path, batch: str, phase: str) -> int:
    argv = ["lane", "--repo", str(job), "--remote", "origin", "--batch-id", batch, "--task", "a"]
    log = str(job.parent / "lane.log")
    code, _, _ = run_cli(capsys, *argv, "--executor", EXECUTOR, "--phase", phase, "--log", log)
    return code


def _remote_outcome(remote: Path, batch: str) -> str:
    return git(remote, "for-each-ref", "--format=%(objectname)", lane_outcome_ref(batch, "a"))


def test_the_outcome_reaches_the_remote_only_when_published(
    lane_job: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    job, remote, batch = lane_job
    assert _lane(capsys, job, batch, "fetch") == 0
    assert _lane(capsys, job, batch, "work") == 0
    assert _remote_outcome(remote, batch) == ""
    assert _lane(capsys, job, batch, "publish") == 0
    assert _remote_outcome(remote, batch) != ""
    assert git(remote, "rev-parse", "--verify", "-q", "refs/heads/imm-lane/init/a").strip()


def test_a_work_step_that_ended_early_publishes_nothing(
    lane_job: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    job, remote, batch = lane_job
    assert _lane(capsys, job, batch, "fetch") == 0
    assert _lane(capsys, job, batch, "publish") == 2
    assert _remote_outcome(remote, batch) == ""


def test_publish_refuses_a_hand_off_that_moves_any_other_ref(
    lane_job: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    job, remote, batch = lane_job
    assert _lane(capsys, job, batch, "fetch") == 0
    assert _lane(capsys, job, batch, "work") == 0
    git_dir = Path(git(job, "rev-parse", "--absolute-git-dir").strip())
    handoff = handoff_path(git_dir, batch, "a")
    forged = json.loads(handoff.read_text())
    main = git(job, "rev-parse", "HEAD").strip()
    forged.append({"ref": "refs/heads/main", "new": forged[0]["new"], "old": main})
    handoff.write_text(json.dumps(forged))
    before = git(remote, "rev-parse", "refs/heads/main")
    assert _lane(capsys, job, batch, "publish") == 2
    assert git(remote, "rev-parse", "refs/heads/main") == before
    assert _remote_outcome(remote, batch) == ""


def test_a_lane_branch_an_earlier_attempt_left_on_the_remote_does_not_stop_publish(
    lane_job: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    job, remote, batch = lane_job
    main = git(remote, "rev-parse", "refs/heads/main").strip()
    git(remote, "update-ref", "refs/heads/imm-lane/init/a", main)  # e.g. parked, then retried
    assert [_lane(capsys, job, batch, phase) for phase in ("fetch", "work", "publish")] == [0, 0, 0]
    assert _remote_outcome(remote, batch).strip()
    assert git(remote, "rev-parse", "refs/heads/imm-lane/init/a").strip() != main


def test_a_settled_outcome_says_how_long_each_of_its_checks_took(
    lane_job: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    job, remote, batch = lane_job
    for phase in ("fetch", "work", "publish"):
        assert _lane(capsys, job, batch, phase) == 0
    outcome = json.loads(git(remote, "show", f"{lane_outcome_ref(batch, 'a')}:outcome.json"))
    assert outcome["state"] == "settled"
    assert list(outcome["durations_ms"]) == ["a:ok"]
    assert outcome["durations_ms"]["a:ok"] > 0
