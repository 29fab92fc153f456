"""GitHub Actions lanes (SPEC §5.2 step 4, §7): one lane attempt = one matrix job of the batch
workflow's run, behind `LaneRunners`.

A pass that admits lanes on GitHub records, per lane attempt, the workflow run that will carry
it (`GITHUB_RUN_ID`, `GITHUB_RUN_ATTEMPT`); the job itself is found later among the run's jobs
— its name carries the task id — and recorded too. One jobs request per run and pass (paged)
tells every lane of that run: running, concluded (with its conclusion), queued too long, or
gone with its run."""

from __future__ import annotations

import io
import re
import shutil
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from imm_action.git.refs import RemoteRefStore
from imm_action.github.client import GitHubClient
from imm_action.github.transport import WorkflowJobInfo
from imm_action.lanes.bundles import (
    BUNDLE_SUFFIX,
    BundleNote,
    import_lane_bundles,
    lane_artifact_name,
    lane_artifact_prefix,
)
from imm_action.lanes.runners import (
    FinishedWithOutcome,
    FinishedWithoutOutcome,
    JobFound,
    LaneAtWork,
    LaneStart,
    RunnerReport,
    Running,
)
from imm_action.model.refs import lane_outcome_ref
from imm_action.model.state import BatchChild, BatchRunState, ChildState, GithubRunner, Runner

# Job states before a runner picked the job up (GitHub's `job.status` enum).
_NOT_STARTED = frozenset({"queued", "waiting", "requested", "pending"})
_NAME_WORDS = re.compile(r"[\s(),]+")


def job_carries(name: str, task_id: str) -> bool:
    """Whether a job's name carries `task_id` as a word of its own: `lane (t1)`,
    `lane (t1, 3f2a…)` and `lane t1` carry `t1`; `lane (t10)` does not."""
    return task_id in _NAME_WORDS.split(name)


@dataclass(frozen=True)
class GitHubRun:
    """The workflow run a pass runs in (`GITHUB_RUN_ID`, `GITHUB_RUN_ATTEMPT`)."""

    client: GitHubClient
    run_id: int
    run_attempt: int

    def lanes(self, queue_timeout: timedelta) -> GitHubLanes:
        return GitHubLanes(
            self.client,
            run_id=self.run_id,
            run_attempt=self.run_attempt,
            queue_timeout=queue_timeout,
            now=lambda: datetime.now(UTC),
        )


class GitHubLanes:
    def __init__(
        self,
        client: GitHubClient,
        *,
        run_id: int,
        run_attempt: int,
        queue_timeout: timedelta,
        now: Callable[[], datetime],
    ) -> None:
        self._client = client
        self._run_id = run_id
        self._run_attempt = run_attempt
        self._queue_timeout = queue_timeout
        self._now = now

    def runner_for(self, task_id: str) -> Runner:
        """This run's matrix will carry the lane; its job is found (and recorded) later."""
        return GithubRunner(run_id=self._run_id, run_attempt=self._run_attempt, job=task_id)

    def start(self, lanes: Sequence[LaneStart]) -> None:
        """Nothing to do: the batch workflow starts the admitted lanes as its matrix."""

    def reports(self, lanes: Sequence[LaneAtWork]) -> Mapping[str, RunnerReport]:
        by_run: dict[int, list[tuple[LaneAtWork, GithubRunner]]] = {}
        reports: dict[str, RunnerReport] = {}
        for lane in lanes:
            if isinstance(lane.runner, GithubRunner):
                by_run.setdefault(lane.runner.run_id, []).append((lane, lane.runner))
            else:
                reports[lane.task_id] = Running()  # a local lane: not ours to judge
        for run_id, members in by_run.items():
            jobs = self._client.run_jobs(run_id)
            for lane, runner in members:
                reports[lane.task_id] = self._report(lane, runner, jobs)
        return reports

    def _report(
        self, lane: LaneAtWork, runner: GithubRunner, jobs: Sequence[WorkflowJobInfo] | None
    ) -> RunnerReport:
        if jobs is None:
            return FinishedWithoutOutcome(f"workflow run {runner.run_id} no longer exists")
        job = _job_of(lane.task_id, runner, jobs)
        if job is None:
            if jobs and all(other.status == "completed" for other in jobs):
                return FinishedWithoutOutcome(
                    f"workflow run {runner.run_id} ended without a job for {lane.task_id}"
                )
            return Running()  # the matrix has not been expanded yet
        found = JobFound(job.id, job.name, job.html_url)
        if job.status == "completed":
            if lane.has_outcome:
                return FinishedWithOutcome(found)
            return FinishedWithoutOutcome(job.conclusion or "completed", job.html_url, found)
        waited = self._now() - job.created_at
        if job.status in _NOT_STARTED and waited > self._queue_timeout:
            minutes = int(self._queue_timeout.total_seconds() // 60)
            return FinishedWithoutOutcome(
                f"queued for more than {minutes} min", job.html_url, found
            )
        return Running(found)


def _job_of(
    task_id: str, runner: GithubRunner, jobs: Sequence[WorkflowJobInfo]
) -> WorkflowJobInfo | None:
    """The recorded job, else the newest job whose name carries the task id."""
    if runner.job_id is not None:
        return next((job for job in jobs if job.id == runner.job_id), None)
    carrying = [job for job in jobs if job_carries(job.name, task_id)]
    return max(carrying, key=lambda job: job.id, default=None)


# A lane's bundle is its outcome and one commit: far below this; an artifact above it is not read.
MAX_BUNDLE_ARTIFACT_BYTES = 256 * 1024 * 1024


def import_left_bundles(
    client: GitHubClient,
    refs: RemoteRefStore,
    state: BatchRunState,
    current_run: int,
    folder: Path,
) -> list[BundleNote]:
    """Bundles that lane jobs of an earlier run uploaded but no integrate job imported (the run
    was cancelled before its integrate job ran, or that job failed): read from that run's
    artifacts, then imported like any lane bundle (checked, never trusted). Work done is not
    done again: the lane is integrated instead of admitted anew."""
    waiting: list[tuple[BatchChild, int]] = [
        (child, child.lane.runner.run_id)
        for child in state.children
        if child.state is ChildState.LANE_ADMITTED
        and child.lane is not None
        and isinstance(child.lane.runner, GithubRunner)
        and child.lane.runner.run_id != current_run
    ]
    if not waiting:
        return []
    outcomes = {c.task_id: lane_outcome_ref(state.batch_id, c.task_id) for c, _ in waiting}
    published = refs.read(sorted(outcomes.values()))
    by_run: dict[int, set[str]] = {}  # run -> the artifact names of its lanes left
    for child, run_id in waiting:
        if published[outcomes[child.task_id]] is None:
            name = lane_artifact_name(state.batch_id, child.task_id, child.attempts)
            by_run.setdefault(run_id, set()).add(name)
    found = False
    for run_id, wanted in sorted(by_run.items()):
        for artifact in client.run_artifacts(run_id, lane_artifact_prefix(state.batch_id)):
            if artifact.name not in wanted or artifact.size > MAX_BUNDLE_ARTIFACT_BYTES:
                continue
            data = client.download_artifact(artifact.id, MAX_BUNDLE_ARTIFACT_BYTES)
            if data is not None and _unzip_bundles(data, folder / artifact.name):
                found = True
    return import_lane_bundles(refs, folder, state) if found else []


def _unzip_bundles(data: bytes, target: Path) -> bool:
    """The `*.bundle` files of an artifact's zip, by their base names only, into `target`."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return False
    wrote = False
    with archive:
        for member in archive.infolist():
            name = PurePosixPath(member.filename).name
            if member.is_dir() or not name.endswith(BUNDLE_SUFFIX) or name.startswith("."):
                continue
            if member.file_size > MAX_BUNDLE_ARTIFACT_BYTES:
                continue
            target.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, (target / name).open("wb") as copy:
                shutil.copyfileobj(source, copy)
            wrote = True
    return wrote
