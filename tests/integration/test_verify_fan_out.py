"""A stack's checks fanned out to verify jobs (issue 32, decision 0054), job by job as the shipped
workflow runs them, on real repositories and a real remote: the stack job (`imm reconcile
--fan-out`) records shards and pushes the stack's top; each verify job (`imm verify`, in a
fresh clone) runs its shard and writes a verdict; the integrate job (`imm reconcile
--verdicts`) lands on verdicts it accepts and never counts a missing one as a pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imm_action.integrate.flakes import FLAKE_RERUNS
from imm_action.model.refs import verify_ref
from imm_action.model.shard import VerifyRound, verdict_artifact
from tests.batch_helpers import (
    current,
    make_lane_commit,
    make_project,
    publish,
    task_file_check,
)
from tests.batch_helpers import run_pass as first_pass
from tests.conftest import git, run_cli

TASKS = ("a", "b", "c", "d")
RUN = 77


class Round:
    """A remote with lanes a..d committed and published: what a round's stack job finds."""

    def __init__(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        *,
        broken: str = "",
        config: str = "",
        durations_ms: int | None = None,
    ) -> None:
        self.capsys = capsys
        self.tmp = tmp_path
        checks = {task: task_file_check(task, unbroken=task == "a") for task in TASKS}
        files = {"config.txt": "mode=ok\n", ".github/imm.yml": config} if config else None
        self.project = make_project(
            tmp_path / "project", {task: [] for task in TASKS}, checks=checks, extra_files=files
        )
        self.remote = tmp_path / "remote.git"
        git(tmp_path, "clone", "-q", "--bare", str(self.project), str(self.remote))
        git(self.project, "remote", "add", "origin", str(self.remote))
        first_pass(self.project, remote="origin")
        state = current(self.project, remote="origin").state
        self.batch = state.batch_id
        for child in state.children:
            assert child.lane is not None
            text = f"{child.task_id}\nbroken\n" if child.task_id == broken else f"{child.task_id}\n"
            files = {f"{child.task_id}.txt": text}
            commit = make_lane_commit(
                self.project, child.lane.base_head, child.task_id, files, batch_id=self.batch
            )
            # what the lane says its checks took (None: a lane of before it said so)
            said = None if durations_ms is None else {f"{child.task_id}:ok": durations_ms}
            publish(self.project, child.task_id, commit, remote="origin", durations_ms=said)
        self.verdicts = tmp_path / "verdicts"

    def reconcile(self, *extra: str) -> str:
        code, _, err = run_cli(
            self.capsys, "reconcile", "init", "--repo", str(self.project), "--remote", "origin",
            "--batch-id", self.batch, *extra,
        )  # fmt: skip
        assert code in (0, 1), err
        return err

    def fanned(self) -> VerifyRound:
        state = current(self.project, remote="origin").state
        assert state.verifying is not None
        return state.verifying

    def verify(self, shard: int) -> Path:
        job = self.tmp / f"verify-{shard}"
        if not job.exists():
            git(self.tmp, "clone", "-q", str(self.remote), str(job))
        # as actions/download-artifact lays out several artifacts: a folder for each
        name = verdict_artifact(self.batch, RUN, shard)
        code, _, err = run_cli(
            self.capsys, "verify", "--repo", str(job), "--remote", "origin",
            "--batch-id", self.batch, "--shard", str(shard),
            "--verdicts", str(self.verdicts / name),
        )  # fmt: skip
        assert code == 0, err
        return self.verdicts / name / f"{name}.json"

    def landed(self) -> list[str]:
        log = git(self.remote, "log", "--format=%s", "refs/heads/imm/init")
        return sorted(task for task in TASKS if f"imm({task})" in log)


@pytest.fixture
def a_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Round:
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN))
    return Round(tmp_path, capsys)


def test_the_stack_job_records_shards_pushes_the_top_and_lands_nothing(a_round: Round) -> None:
    err = a_round.reconcile("--fan-out")
    fanned = a_round.fanned()
    # four checks never timed (a minute each, assumed) would keep 2 workers busy 2 minutes
    assert [len(shard.checks) for shard in fanned.shards] == [1, 1, 1, 1]
    assert fanned.run_id == RUN
    assert {check.tree for shard in fanned.shards for check in shard.checks} == {
        git(a_round.remote, "rev-parse", f"{fanned.top}^{{tree}}").strip()
    }
    assert git(a_round.remote, "rev-parse", verify_ref(a_round.batch)).strip() == fanned.top
    assert a_round.landed() == []
    assert "verifying 4 checks of the stack up to" in err


def test_the_integrate_job_lands_on_the_verify_jobs_verdicts_without_running_a_check(
    a_round: Round,
) -> None:
    a_round.reconcile("--fan-out")
    for shard in a_round.fanned().shards:
        a_round.verify(shard.index)
    err = a_round.reconcile("--verdicts", str(a_round.verdicts))
    assert a_round.landed() == list(TASKS)
    assert "took 4 verdicts of 4 verify jobs" in err
    assert "0 check runs here, 4 on verify runners, every check passed on its top" in err, err
    state = current(a_round.project, remote="origin").state
    assert state.verifying is None
    assert verify_ref(a_round.batch) not in git(a_round.remote, "for-each-ref")


def test_a_shard_without_a_verdict_lands_nothing_and_only_its_checks_are_owed_again(
    a_round: Round, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_round.reconcile("--fan-out")
    for shard in a_round.fanned().shards[1:]:  # shard 1's job died
        a_round.verify(shard.index)
    err = a_round.reconcile("--verdicts", str(a_round.verdicts))
    assert "verify jobs left shard 1 without a verdict" in err
    assert a_round.landed() == []
    assert a_round.fanned().losses == 1
    # the next round's stack job owes only shard 1's check (the others' passes are kept): a
    # minute's work, verified on the integrating runner rather than fanned out
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN + 1))
    a_round.reconcile("--fan-out")
    assert current(a_round.project, remote="origin").state.verifying is None
    err = a_round.reconcile("--verdicts", str(a_round.verdicts))
    assert "1 check run" in err
    assert a_round.landed() == list(TASKS)


def test_a_verdict_for_another_tree_is_refused_and_passes_nothing(a_round: Round) -> None:
    a_round.reconcile("--fan-out")
    for shard in a_round.fanned().shards:
        path = a_round.verify(shard.index)
        if shard.index == 2:
            body = json.loads(path.read_text())
            body["verdicts"][0]["tree"] = "0" * 40
            path.write_text(json.dumps(body))
    err = a_round.reconcile("--verdicts", str(a_round.verdicts))
    assert "which shard 2 did not owe" in err
    assert a_round.landed() == []


def test_a_verdict_file_found_twice_is_no_verdict(a_round: Round) -> None:
    a_round.reconcile("--fan-out")
    for shard in a_round.fanned().shards:
        path = a_round.verify(shard.index)
        if shard.index == 1:  # a second file of the same name, beside the artifacts' folders
            (a_round.verdicts / path.name).write_bytes(path.read_bytes())
    err = a_round.reconcile("--verdicts", str(a_round.verdicts))
    assert "verify jobs left shard 1 without a verdict" in err
    assert a_round.landed() == []


def test_a_failing_check_in_a_shard_finds_its_culprit_and_the_rest_land(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN))
    broken = Round(tmp_path, capsys, broken="b")
    broken.reconcile("--fan-out")
    for shard in broken.fanned().shards:
        broken.verify(shard.index)
    err = broken.reconcile("--verdicts", str(broken.verdicts))
    assert "bisection found b (a:ok first failed on" in err
    assert broken.landed() == ["a", "c", "d"]
    parked = {c.task_id: c.state for c in current(broken.project, remote="origin").state.children}
    assert parked["b"] == "needs_human"


def test_a_failing_check_is_bisected_by_a_second_stage_of_verify_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN))
    # fan out whatever there is to run, so that a's check's probes fan out too
    broken = Round(tmp_path, capsys, broken="b", config="verify_fan_out_seconds: 0\n")
    broken.reconcile("--fan-out")
    for shard in broken.fanned().shards:
        broken.verify(shard.index)
    # the bisect job: a's check failed on the top; its probes go to a second stage
    err = broken.reconcile("--fan-out", "--verdicts", str(broken.verdicts))
    fanned = broken.fanned()
    probes = [check for shard in fanned.of_stage(2) for check in shard.checks]
    assert sorted(check.check_id for check in probes) == ["a:ok"] * 3  # levels 1 to 3
    assert [shard.index for shard in fanned.of_stage(2)] == [5, 6, 7]
    assert "verifying 3 bisection probes of the stack up to" in err
    assert broken.landed() == []
    for shard in fanned.of_stage(2):
        broken.verify(shard.index)
    err = broken.reconcile("--verdicts", str(broken.verdicts))
    assert "took 7 verdicts of 7 verify jobs" in err
    # the reruns that confirm a failure stay here (issue 61): once on the top, on every rerun
    # of b's candidate, once afresh on its parent — and beside them, the three checks of the
    # stack without b, which the next stack takes
    here = 2 + FLAKE_RERUNS + 3
    assert f"{here} check runs here, 7 on verify runners; bisection found b (a:ok first" in err
    assert "(a, c, d): 0 check runs, 3 run ahead while a lane below was tried, every" in err
    assert broken.landed() == ["a", "c", "d"]


def test_checks_their_lanes_ran_quickly_are_verified_on_the_integrating_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN))
    quick = Round(tmp_path, capsys, durations_ms=40)
    quick.reconcile("--fan-out")
    assert current(quick.project, remote="origin").state.verifying is None
    err = quick.reconcile("--verdicts", str(quick.verdicts))
    assert "4 check runs, every check passed on its top" in err
    assert quick.landed() == list(TASKS)


def test_checks_their_lanes_ran_for_long_fan_out_by_what_the_lanes_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_RUN_ID", str(RUN))
    slow = Round(tmp_path, capsys, durations_ms=45_000)
    slow.reconcile("--fan-out")
    assert {check.expected_ms for shard in slow.fanned().shards for check in shard.checks} == {
        45_000
    }
