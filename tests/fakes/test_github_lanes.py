"""GitHub lanes: one lane attempt = one matrix job. Passes run on a real repository and read the
jobs through PyGithub from the fake GitHub over HTTP; the job moves as GitHub would move it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from imm_action.integrate.continuation import Stopped
from imm_action.lanes.github import GitHubLanes, job_carries
from imm_action.lanes.runners import LaneAtWork, RunnerReport
from imm_action.model.state import BatchChild, GithubRunner
from imm_action.passes.driver import reconcile
from imm_action.passes.request import PassResult
from tests.batch_helpers import current, make_project, open_local, work
from tests.fake_github import FakeGitHub

REPO = "acme/widgets"
JOBS = r"/repos/acme/widgets/actions/runs/[0-9]+/jobs"


def lanes_of(fake: FakeGitHub, run_id: int, *, late_by: timedelta = timedelta()) -> GitHubLanes:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    return GitHubLanes(
        client, run_id=run_id, run_attempt=1, queue_timeout=timedelta(minutes=30),
        now=lambda: datetime.now(UTC) + late_by,
    )  # fmt: skip


def github_pass(
    repo: Path, lanes: GitHubLanes, *, admit: bool, stopped: Stopped = Stopped.RESUME
) -> PassResult:
    """`imm reconcile` in a job of the batch workflow: `--admit` in the plan job (and
    `--continue-stopped` in that of a person's dispatch)."""
    batch_repo = open_local(repo)
    request = pass_request(batch_repo, "init", batch_id=None, admit=admit, stopped=stopped)
    ports = pass_ports(batch_repo, lambda line: None, path_env=os.environ["PATH"], lanes=lanes)
    return reconcile(request, ports)


def child(repo: Path, task: str = "a") -> BatchChild:
    return next(c for c in current(repo).state.children if c.task_id == task)


def runner(repo: Path, task: str = "a") -> GithubRunner:
    lane = child(repo, task).lane
    assert lane is not None
    assert isinstance(lane.runner, GithubRunner)
    return lane.runner


def admitted_in_a_run(fake: FakeGitHub, repo: Path, name: str = "lane (a)") -> tuple[int, int]:
    """A plan job admits the lane in its run; the run's matrix job for it starts."""
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    job_id = fake.add_job(REPO, run_id, name)
    fake.move_job(REPO, job_id, "in_progress")
    return run_id, job_id


@pytest.mark.parametrize("conclusion", ["failure", "timed_out"])
def test_a_lane_job_that_ends_without_an_outcome_is_admitted_again_in_a_new_job(
    fake: FakeGitHub, tmp_path: Path, conclusion: str
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    first_run, first_job = admitted_in_a_run(fake, repo)
    github_pass(repo, lanes_of(fake, first_run), admit=False)
    assert runner(repo).job_id == first_job
    fake.move_job(REPO, first_job, "completed", conclusion)

    second_run = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, second_run), admit=True)
    assert (str(child(repo).state), child(repo).attempts) == ("lane_admitted", 1)
    assert (runner(repo).run_id, runner(repo).job_id) == (second_run, None)
    second_job = fake.add_job(REPO, second_run, "lane (a)")
    github_pass(repo, lanes_of(fake, second_run), admit=False)
    assert runner(repo).job_id == second_job
    assert runner(repo).job_url == fake.repo(REPO).jobs[second_job]["html_url"]


def _cancelled_mid_round(fake: FakeGitHub, tmp_path: Path) -> tuple[Path, int]:
    """Lanes a and b admitted in one run; b finished with its outcome; the run is cancelled
    while a works (its job: `cancelled`); the integrate job's pass follows."""
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    jobs = {task: fake.add_job(REPO, run_id, f"imm lane {task}") for task in ("a", "b")}
    work(repo, "b")
    fake.move_job(REPO, jobs["b"], "completed", "success")
    fake.move_job(REPO, jobs["a"], "completed", "cancelled")
    github_pass(repo, lanes_of(fake, run_id), admit=False)
    return repo, run_id


def test_a_cancelled_run_stops_the_batch_keeping_what_finished(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo, run_id = _cancelled_mid_round(fake, tmp_path)
    state = current(repo).state
    assert state.batch_state == "cancelled"
    assert state.stop_reason == f"batch_run_cancelled: workflow run {run_id} was cancelled"
    assert str(child(repo, "b").state) == "integrated"
    assert (str(child(repo).state), child(repo).attempts) == ("pending", 0)  # not lost
    report = current(repo).report
    assert report is not None
    assert report.reason.startswith(f"batch_run_cancelled: workflow run {run_id} was cancelled")


def test_a_batch_stopped_by_a_cancelled_run_goes_on_with_only_the_cancelled_lanes(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo, _ = _cancelled_mid_round(fake, tmp_path)
    next_run = fake.add_run(REPO)
    result = github_pass(repo, lanes_of(fake, next_run), admit=True, stopped=Stopped.CONTINUE)
    assert result.admitted == ("a",)
    assert str(child(repo, "b").state) == "integrated"


def test_a_person_going_on_in_the_pass_that_first_sees_the_cancel_starts_the_lane_again(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    """No integrate job ran after the cancel (the run was force-cancelled): the plan job of a
    person's dispatch is the first pass to see it, and going on is what was asked."""
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    jobs = {task: fake.add_job(REPO, run_id, f"imm lane {task}") for task in ("a", "b")}
    fake.move_job(REPO, jobs["a"], "completed", "cancelled")
    fake.move_job(REPO, jobs["b"], "completed", "cancelled")
    next_run = fake.add_run(REPO)
    result = github_pass(repo, lanes_of(fake, next_run), admit=True, stopped=Stopped.CONTINUE)
    assert sorted(result.admitted) == ["a", "b"]
    state = current(repo).state
    assert (state.batch_state, state.stop_reason) == ("running", None)
    assert [c.attempts for c in state.children] == [0, 0]


def test_the_third_lost_job_parks_the_lane_naming_the_conclusion_and_the_job(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    for _ in range(3):
        _, job_id = admitted_in_a_run(fake, repo)
        fake.move_job(REPO, job_id, "completed", "timed_out")
    github_pass(repo, lanes_of(fake, fake.add_run(REPO)), admit=True)
    parked = child(repo)
    job_url = fake.repo(REPO).jobs[job_id]["html_url"]
    assert (str(parked.state), parked.attempts) == ("needs_human", 3)
    assert parked.reason == (
        f"batch_lane_lost: lane job {job_url} ended without an outcome (timed_out) "
        "(3 lost attempts)"
    )
    assert child(repo, "b").reason == "dependency a parked"
    assert current(repo).state.batch_state == "needs_human"


def test_a_lane_job_in_progress_is_waited_for(fake: FakeGitHub, tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id, _ = admitted_in_a_run(fake, repo)
    github_pass(repo, lanes_of(fake, run_id), admit=False)
    recorded = current(repo).commit
    github_pass(repo, lanes_of(fake, run_id, late_by=timedelta(hours=5)), admit=False)
    assert (str(child(repo).state), child(repo).attempts) == ("lane_admitted", 0)
    assert current(repo).commit == recorded  # nothing changed, nothing written
    assert current(repo).state.batch_state == "running"


def test_a_lane_job_queued_past_the_timeout_is_lost(fake: FakeGitHub, tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    fake.add_job(REPO, run_id, "lane (a)")  # queued, never picked up
    github_pass(repo, lanes_of(fake, run_id, late_by=timedelta(minutes=29)), admit=False)
    assert str(child(repo).state) == "lane_admitted"
    github_pass(repo, lanes_of(fake, run_id, late_by=timedelta(minutes=31)), admit=False)
    assert (str(child(repo).state), child(repo).attempts) == ("pending", 1)


def test_a_lane_whose_run_no_longer_exists_is_lost(fake: FakeGitHub, tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id, _ = admitted_in_a_run(fake, repo)
    fake.delete_run(REPO, run_id)
    github_pass(repo, lanes_of(fake, run_id), admit=False)
    assert (str(child(repo).state), child(repo).attempts) == ("pending", 1)


def test_a_lane_job_that_published_its_outcome_is_integrated(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id, job_id = admitted_in_a_run(fake, repo)
    work(repo, "a")
    fake.move_job(REPO, job_id, "completed", "success")
    result = github_pass(repo, lanes_of(fake, run_id), admit=False)
    assert result.integrated == ("a",)
    assert current(repo).state.batch_state == "completed"


def test_one_jobs_request_per_run_and_pass_for_all_its_lanes(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": []})
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    for task in ("a", "b", "c"):
        fake.move_job(REPO, fake.add_job(REPO, run_id, f"lane ({task})"), "in_progress")
    before = len(fake.requests_to("GET", JOBS))
    github_pass(repo, lanes_of(fake, run_id), admit=False)
    assert len(fake.requests_to("GET", JOBS)) - before == 1
    assert [runner(repo, task).job for task in ("a", "b", "c")] == [
        "lane (a)", "lane (b)", "lane (c)"
    ]  # fmt: skip


def test_the_jobs_of_a_large_run_are_read_page_by_page(fake: FakeGitHub, tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id = fake.add_run(REPO)
    github_pass(repo, lanes_of(fake, run_id), admit=True)
    for index in range(120):
        fake.add_job(REPO, run_id, f"lane (other-{index})")
    job_id = fake.add_job(REPO, run_id, "lane (a)")
    before = len(fake.requests_to("GET", JOBS))
    github_pass(repo, lanes_of(fake, run_id), admit=False)
    assert len(fake.requests_to("GET", JOBS)) - before == 2  # 100 jobs a page
    assert runner(repo).job_id == job_id


@pytest.mark.parametrize(
    ("name", "carries"),
    [("lane (t1)", True), ("lane (t1, 3f2a)", True), ("lane t1", True), ("lane (t10)", False),
     ("plan", False)],
)  # fmt: skip
def test_a_job_carries_the_task_whose_id_is_a_word_of_its_name(name: str, carries: bool) -> None:
    assert job_carries(name, "t1") is carries


class _PublishingWhileAsked(GitHubLanes):
    """The lane publishes its outcome and its job ends just after the pass read the refs."""

    def __init__(self, lanes: GitHubLanes, publish: Callable[[], object]) -> None:
        self.__dict__.update(lanes.__dict__)
        self._publish = publish

    def reports(self, lanes: Sequence[LaneAtWork]) -> Mapping[str, RunnerReport]:
        self._publish()
        return super().reports(lanes)


def test_a_job_that_ended_just_after_publishing_its_outcome_is_not_taken_for_lost(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_id, job_id = admitted_in_a_run(fake, repo)

    def publish_and_end() -> None:
        work(repo, "a")
        fake.move_job(REPO, job_id, "completed", "success")

    lanes = _PublishingWhileAsked(lanes_of(fake, run_id), publish_and_end)
    result = github_pass(repo, lanes, admit=False)
    assert result.integrated == ("a",)
    assert child(repo).attempts == 0
