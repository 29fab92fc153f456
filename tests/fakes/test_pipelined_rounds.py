"""Pipelined rounds on GitHub (issue 61, ADR 0075), job by job as the shipped workflow runs them,
on real repositories, a real remote and the fake GitHub: a round's stack job dispatches the
next round as soon as a lane can start on its stack's lane commits; that round's lanes run and
its stack is fanned out while the first round's verify jobs still work; each round's integrate
job takes its own verdicts, lands what they judge, and leaves the other round to its run."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

from imm_action.actions.runtime import ActionsFiles
from imm_action.carriers.source import Initiatives, NoIssueSource
from imm_action.commands import reconcile, verify
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from imm_action.lanes.github import GitHubRun
from imm_action.model.refs import verify_ref
from imm_action.model.shard import VerifyRound, verdict_artifact
from imm_action.model.state import BatchRunState, ChildState
from imm_action.ports import Ports
from tests.batch_helpers import (
    current,
    make_lane_commit,
    make_project,
    publish,
    task_file_check,
)
from tests.conftest import git
from tests.fake_github import FakeGitHub

REPO = "acme/widgets"
# a `name<<DELIMITER` block of $GITHUB_OUTPUT, as the runner reads it
OUTPUT_BLOCK = re.compile(
    r"^(?P<name>[\w-]+)<<(?P<end>\S+)\n(?P<value>.*?)\n(?P=end)$",
    re.M | re.S,
)


class Workflow:
    """Tasks a and c, and b after a; every stack's checks fan out to verify jobs. Each method
    is one job of one run."""

    def __init__(self, tmp_path: Path, fake: FakeGitHub, config: str = "") -> None:
        self.tmp, self.fake = tmp_path, fake
        graph = {"a": [], "b": ["a"], "c": []}
        files = {".github/imm.yml": f"verify_fan_out_seconds: 0\n{config}"}
        checks = {task: task_file_check(task, unbroken=task == "a") for task in graph}
        self.project = make_project(tmp_path / "project", graph, checks=checks, extra_files=files)
        self.remote = tmp_path / "remote.git"
        git(tmp_path, "clone", "-q", "--bare", str(self.project), str(self.remote))
        git(self.project, "remote", "add", "origin", str(self.remote))
        self.client = GitHubClient(
            build_github("test-token", fake.url), REPO, RetryBudget(attempts=4, max_wait=0.01)
        )
        self.log = io.StringIO()

    def run(self) -> int:
        """A workflow run in progress, as GitHub starts one for a dispatch."""
        return self.fake.add_run(REPO)

    def end(self, run_id: int) -> None:
        self.fake.repo(REPO).runs[run_id]["status"] = "completed"

    def job(self, run_id: int, *, admit: bool = False, fan_out: bool = False,
            verdicts: bool = False, next_round_asked: bool = False) -> str:  # fmt: skip
        """One pass of a job of run `run_id`: the plan job (`admit`), the stack job
        (`fan_out`), the bisect job (both), the integrate job (`verdicts`). What it logged;
        its step outputs in `self.outputs`."""
        batch = None if admit and not self.dispatches() else self.state().batch_id
        files = ActionsFiles(self.tmp / f"output-{run_id}", self.tmp / f"summary-{run_id}")
        assert files.output is not None
        files.output.write_text("")
        args = reconcile.ReconcileArgs(
            "init", self.project, batch, admit, "origin", "text", os.environ["PATH"],
            fan_out=fan_out, verdicts=self.verdicts(run_id) if verdicts else None,
            next_round_asked=next_round_asked, actions=files,
        )  # fmt: skip
        sink = io.StringIO()
        reporting = reconcile.GitHubReporting(self.client, f"https://github.example/{REPO}")
        ports = reconcile.ReconcilePorts(
            CommandIO(sink, sink), Initiatives(self.project, NoIssueSource()), reporting,
            GitHubRun(self.client, run_id, 1),
        )  # fmt: skip
        code = reconcile.run(args, ports)
        assert code in (0, 1), sink.getvalue()
        self.log.write(sink.getvalue())
        blocks = OUTPUT_BLOCK.finditer(files.output.read_text())
        self.outputs = {block["name"]: block["value"] for block in blocks}
        return sink.getvalue()

    def integrate_job_ended(self, run_id: int) -> None:
        """Run `run_id`'s integrate job ended, its run not yet (GitHub ends a run after)."""
        job = self.fake.add_job(REPO, run_id, "integrate")
        self.fake.move_job(REPO, job, "completed", "success")

    def lane(self, task: str, text: str = "") -> None:
        """The lane job: its commit on the base it was admitted on, published."""
        state = self.state()
        child = next(c for c in state.children if c.task_id == task)
        assert child.lane is not None, f"{task} was not admitted"
        git(self.project, "fetch", "-q", "origin", child.lane.base_head)
        files = {f"{task}.txt": text or f"{task}\n"}
        commit = make_lane_commit(
            self.project, child.lane.base_head, task, files, batch_id=state.batch_id
        )
        publish(self.project, task, commit, remote="origin")

    def verify_jobs(self, run_id: int, stage: int = 1) -> int:
        """Every verify job of a stage of run `run_id`'s round, each in a fresh clone; how
        many ran."""
        fanned = self.state().round_of(run_id)
        assert fanned is not None, f"run {run_id} has no round"
        for shard in fanned.of_stage(stage):
            job = self.tmp / f"verify-{run_id}-{shard.index}"
            git(self.tmp, "clone", "-q", str(self.remote), str(job))
            name = verdict_artifact(self.state().batch_id, run_id, shard.index)
            environment = {**os.environ, "GITHUB_RUN_ID": str(run_id)}
            args = verify.VerifyArgs(
                self.state().batch_id, shard.index, job, "origin", environment,
                verdicts=self.verdicts(run_id) / name,
            )  # fmt: skip
            sink = io.StringIO()
            code = verify.run(args, Ports(CommandIO(sink, sink), Initiatives(job, NoIssueSource())))
            assert code == 0, sink.getvalue()
        return len(fanned.of_stage(stage))

    def verdicts(self, run_id: int) -> Path:
        return self.tmp / f"verdicts-{run_id}"

    def state(self) -> BatchRunState:
        return current(self.project, remote="origin").state

    def states(self) -> dict[str, ChildState]:
        return {child.task_id: child.state for child in self.state().children}

    def landed(self) -> list[str]:
        log = git(self.remote, "log", "--format=%s", "refs/heads/imm/init")
        return sorted(task for task in "abc" if f"imm({task})" in log)

    def dispatches(self) -> list[dict[str, object]]:
        return list(self.fake.repo(REPO).dispatches)

    def rounds(self) -> list[int]:
        return [r.run_id for r in self.state().verify_rounds]


def _first_round_fanned_out(flow: Workflow) -> int:
    """Run 1: plan (a and c admitted), their lanes, the stack job."""
    first = flow.run()
    flow.job(first, admit=True)
    assert flow.states() == {"a": "lane_admitted", "b": "pending", "c": "lane_admitted"}
    flow.lane("a")
    flow.lane("c")
    flow.job(first, fan_out=True)
    assert flow.rounds() == [first]
    return first


def test_the_stack_job_dispatches_the_next_round_when_a_lane_can_start_on_its_stack(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    _first_round_fanned_out(flow)
    assert "dispatched the next round for b: its lanes run while this stack is verified" in (
        flow.log.getvalue()
    )
    (dispatched,) = flow.dispatches()
    assert dispatched["inputs"] == {
        "initiative": "init", "batch_id": flow.state().batch_id, "pass": "continue"
    }  # fmt: skip
    assert flow.landed() == []  # nothing verified yet: b starts on a's lane commit


def test_a_stack_job_refused_the_dispatch_says_so_and_the_integrate_job_dispatches(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    fake.repo(REPO).dispatches_refused = 1  # a workflow of before: the stack job may not
    first = _first_round_fanned_out(flow)
    assert "the next round was not dispatched early (403 Resource not accessible" in (
        flow.log.getvalue()
    )
    assert flow.outputs["next-round"] == "false"
    assert flow.dispatches() == []
    flow.verify_jobs(first)
    flow.job(first, verdicts=True)
    assert flow.landed() == ["a", "c"]
    assert len(flow.dispatches()) == 1


def test_without_speculative_lanes_the_stack_job_asks_for_no_round_and_the_integrate_job_does(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake, config="speculative_lanes: false\n")
    first = _first_round_fanned_out(flow)
    assert flow.dispatches() == []
    flow.verify_jobs(first)
    flow.job(first, verdicts=True)
    assert flow.landed() == ["a", "c"]
    assert len(flow.dispatches()) == 1  # b waits for a to land: the integrate job asks


def test_an_integrate_job_told_its_stack_job_asked_asks_for_no_second_round(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first = _first_round_fanned_out(flow)
    flow.verify_jobs(first)
    flow.job(first, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "c"]
    assert len(flow.dispatches()) == 1  # the stack job's


def test_two_rounds_verified_at_once_each_land_on_their_own_verdicts(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first = _first_round_fanned_out(flow)
    top_of_first = flow.state().verifying
    assert top_of_first is not None
    # run 2, dispatched by run 1's stack job, while run 1's verify jobs work: b starts on a's
    # lane commit, and its stack (a, c, b) is fanned out beside run 1's round
    second = flow.run()
    flow.job(second, admit=True)
    assert flow.states()["b"] == "lane_admitted"
    flow.lane("b")
    err = flow.job(second, fan_out=True)
    assert "verifying 3 checks of the stack up to" in err
    assert flow.rounds() == [first, second]
    assert git(flow.remote, "rev-parse", verify_ref(flow.state().batch_id)).strip() == (
        _round(flow, second).top
    )
    (check_run,) = fake.repo(REPO).check_runs.values()
    assert f"Verification (run {first}): verifying 2 checks" in str(check_run["output"])
    assert f"Verification (run {second}): verifying 3 checks" in str(check_run["output"])
    # run 1's verify jobs start late: their round's top is still fetched, by the state
    assert flow.verify_jobs(first) == 2
    err = flow.job(first, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "c"]
    assert "0 check runs here, 2 on verify runners" in err, err
    assert "b: left to the later run that admitted them" in err
    assert flow.rounds() == [second]
    assert flow.states()["b"] == "lane_committed"
    flow.end(first)
    flow.verify_jobs(second)
    err = flow.job(second, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "b", "c"]
    assert "0 check runs here, 3 on verify runners" in err, err
    assert flow.rounds() == []
    assert flow.state().batch_state == "completed"


def test_an_earlier_round_bisects_on_its_own_verify_jobs_while_a_later_one_is_newest(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first = flow.run()
    flow.job(first, admit=True)
    flow.lane("a")
    flow.lane("c", "c\nbroken\n")  # breaks a's check from its level up
    flow.job(first, fan_out=True)
    second = flow.run()
    flow.job(second, admit=True)
    flow.lane("b")
    flow.job(second, fan_out=True)
    assert flow.rounds() == [first, second]
    flow.verify_jobs(first)
    flow.job(first, fan_out=True, verdicts=True)  # run 1's bisect job
    probes = json.loads(flow.outputs["verify-matrix"])["include"]
    assert flow.outputs["has-verify"] == "true"
    assert [entry["checks"] for entry in probes] == ["1"]  # a's check on a's level
    assert flow.rounds() == [first, second]
    flow.verify_jobs(first, stage=2)
    err = flow.job(first, verdicts=True, next_round_asked=True)
    assert "bisection found c (a:ok first failed on" in err, err
    assert flow.landed() == ["a"]
    assert flow.states()["c"] == "needs_human"
    flow.end(first)
    flow.verify_jobs(second)  # on a stack that held c: its verdicts match nothing now
    flow.job(second, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "b"]
    assert flow.rounds() == []


def test_a_later_round_that_lands_everything_first_ends_the_batch_and_the_earlier_round(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first = _first_round_fanned_out(flow)
    second = flow.run()
    flow.job(second, admit=True)
    flow.lane("b")
    flow.job(second, fan_out=True)
    flow.verify_jobs(second)
    err = flow.job(second, verdicts=True)  # run 1's verify jobs are still at work
    assert flow.landed() == ["a", "b", "c"]  # its top, the whole stack, passed every check
    assert "0 check runs here" in err, err
    assert flow.state().batch_state == "completed"
    assert flow.rounds() == []  # no verdict of run 1's can matter any more
    assert verify_ref(flow.state().batch_id) not in git(flow.remote, "for-each-ref")
    flow.job(first, verdicts=True)
    assert flow.state().batch_state == "completed"


def _a_lane_of_run_two_ended(flow: Workflow) -> tuple[int, int]:
    """Run 1's stack fanned out; run 2's lane b, built on a's lane commit, has ended (its
    outcome published), and run 2's stack job has not run yet."""
    first = _first_round_fanned_out(flow)
    second = flow.run()
    flow.job(second, admit=True)
    flow.lane("b")
    flow.verify_jobs(first)
    return first, second


def test_an_integrate_job_verifying_itself_leaves_a_running_runs_lanes_to_that_run(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first, second = _a_lane_of_run_two_ended(flow)
    err = flow.job(first, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "c"]  # b is run 2's: its stack job fans it out
    assert "0 check runs here, 2 on verify runners" in err, err
    flow.job(second, fan_out=True)
    assert flow.rounds() == [second]
    flow.verify_jobs(second)
    flow.job(second, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "b", "c"]


def test_the_lanes_of_a_run_whose_integrate_job_ended_are_taken_by_the_next_integrate_job(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first, second = _a_lane_of_run_two_ended(flow)
    flow.integrate_job_ended(second)  # its run not ended yet: GitHub ends it after
    err = flow.job(first, verdicts=True, next_round_asked=True)
    assert flow.landed() == ["a", "b", "c"]
    assert "verified 3 lanes as one stack (a, c, b): 3 check runs" in err, err


def test_a_round_with_no_lane_of_its_own_fans_out_nothing_a_running_round_owes(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake, config="speculative_lanes: false\n")
    first = _first_round_fanned_out(flow)
    second = flow.run()  # a person's `/imm run` while run 1's verify jobs work
    flow.job(second, admit=True)
    assert flow.states()["b"] == "pending"  # waits for a to land
    err = flow.job(second, fan_out=True)
    assert flow.rounds() == [first]
    assert "verifying" not in err


def test_a_round_whose_run_ended_untaken_is_taken_over_by_the_next_stack_job(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    flow = Workflow(tmp_path, fake)
    first = _first_round_fanned_out(flow)
    flow.end(first)  # cancelled: its integrate job never took the round
    second = flow.run()
    flow.job(second, admit=True)
    flow.lane("b")
    flow.job(second, fan_out=True)
    assert flow.rounds() == [second]


def _round(flow: Workflow, run_id: int) -> VerifyRound:
    found = flow.state().round_of(run_id)
    assert found is not None
    return found
