"""A lane whose job uploaded its bundle in a run whose integrate job never imported it (the run
was cancelled first, or that job failed) is imported by the next pass from that run's
artifacts, through the fake GitHub's artifacts API — never admitted and run again (issue 31)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.carriers.source import Initiatives, NoIssueSource
from imm_action.commands import reconcile
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from imm_action.lanes.github import GitHubRun
from imm_action.model.state import GithubRunner
from tests.batch_helpers import current, make_project
from tests.conftest import git, run_cli
from tests.fake_github import FakeGitHub

REPO = "acme/widgets"
EXECUTOR = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'lane_executor.py'}"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO)
        github.add_workflow(REPO, "imm-batch.yml")
        github.state.artifacts_root = tmp_path / "artifacts"
        yield github


def _pass(fake: FakeGitHub, project: Path, run_id: int, *, admit: bool) -> str:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    args = reconcile.ReconcileArgs(
        slug="init", repo=project, batch_id=None, admit=admit, remote="origin",
        format="text", path_env="/usr/bin:/bin",
    )  # fmt: skip
    sink = io.StringIO()
    ports = reconcile.ReconcilePorts(
        CommandIO(sink, sink), Initiatives(project, NoIssueSource()), None,
        GitHubRun(client, run_id, 1),
    )  # fmt: skip
    reconcile.run(args, ports)
    return sink.getvalue()


def _lane_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, remote: Path, batch: str, task: str
) -> Path:
    """A lane job of `task`: fetch, work and bundle in a fresh clone, as the action runs them."""
    job = tmp_path / f"job-{task}"
    git(tmp_path, "clone", "-q", str(remote), str(job))
    bundle = tmp_path / f"bundle-{task}" / f"{task}.bundle"
    for phase in ("fetch", "work", "bundle"):
        extra = ["--bundle", str(bundle)] if phase == "bundle" else []
        code, _, err = run_cli(
            capsys, "lane", "--repo", str(job), "--remote", "origin", "--batch-id", batch,
            "--task", task, "--executor", EXECUTOR, "--phase", phase, *extra,
        )  # fmt: skip
        assert code == 0, err
    return bundle


def test_a_bundle_an_earlier_run_uploaded_but_never_imported_lands_without_running_again(
    fake: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "ok", "b": "ok"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    project = make_project(tmp_path / "project", {"a": [], "b": []})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    first = fake.add_run(REPO)
    _pass(fake, project, first, admit=True)
    batch = current(project, remote="origin").state.batch_id
    bundle = _lane_job(capsys, tmp_path, remote, batch, "a")
    # the run's lane job for `a` uploaded its bundle; `b`'s job died; its integrate job failed
    stored = fake.state.artifacts_root
    assert stored is not None
    artifact = stored / str(first) / f"imm-lane-{batch}-a-0"
    artifact.mkdir(parents=True)
    (artifact / "a.bundle").write_bytes(bundle.read_bytes())
    fake.move_job(REPO, fake.add_job(REPO, first, "imm lane a"), "completed", "success")
    fake.move_job(REPO, fake.add_job(REPO, first, "imm lane b"), "completed", "failure")

    second = fake.add_run(REPO)
    said = _pass(fake, project, second, admit=True)  # the next run's plan job

    assert f"'imm-lane-{batch}-a-0/a.bundle' (a): imported" in said
    children = {c.task_id: c for c in current(project, remote="origin").state.children}
    assert (str(children["a"].state), children["a"].attempts) == ("integrated", 0)
    b = children["b"]
    assert (str(b.state), b.attempts) == ("lane_admitted", 1)  # b was lost: it runs again
    assert b.lane is not None
    assert isinstance(b.lane.runner, GithubRunner)
    assert b.lane.runner.run_id == second
    downloads = fake.requests_to("GET", r"/repos/acme/widgets/actions/artifacts/[0-9]+/zip")
    assert len(downloads) == 1
