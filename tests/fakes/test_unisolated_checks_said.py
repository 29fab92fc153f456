"""The status comment says when integration checks run within reach of the job's token
(`integration_isolation: none`, SPEC §8), and says nothing of it when they do not."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.carriers.github import GitHubSource
from imm_action.carriers.source import Initiatives
from imm_action.commands import reconcile
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient, RetryBudget, build_github
from imm_action.verify.isolation import check_user
from tests.conftest import initiative_files, make_repo
from tests.fake_github import FakeGitHub

REPO = "acme/widgets"
SAID = "Integration checks run as the runner's own user"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO)
        github.add_workflow(REPO, "imm-batch.yml")
        yield github


def _comment_after_a_pass(fake: FakeGitHub, tmp_path: Path, config: str) -> str:
    files = initiative_files("work", {"a": []})
    del files["docs/initiatives/work.md"]  # carried by the GitHub issue
    repo = make_repo(tmp_path / "repo", {**files, ".github/imm.yml": config})
    parent = fake.add_tracker_initiative(REPO, "work")
    fake.add_tracker_task(REPO, parent, "work", "a")
    client = GitHubClient(
        build_github("test-token", fake.url), REPO, RetryBudget(attempts=3, max_wait=0.01)
    )
    reporting = reconcile.GitHubReporting(client, f"https://github.example/{REPO}")
    initiatives = Initiatives(repo, GitHubSource(client, REPO, str(fake.repo(REPO).id)))
    args = reconcile.ReconcileArgs("work", repo, None, True, None, "text", os.environ["PATH"])
    sink = io.StringIO()
    reconcile.run(args, reconcile.ReconcilePorts(CommandIO(sink, sink), initiatives, reporting))
    (comment,) = fake.repo(REPO).comments.values()
    return str(comment["body"])


def test_the_status_comment_says_checks_run_unisolated_under_integration_isolation_none(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    body = _comment_after_a_pass(fake, tmp_path, "integration_isolation: none\n")
    assert SAID in body
    assert "integration_isolation: none" in body


@pytest.mark.skipif(check_user() is None, reason="needs root or passwordless sudo")
def test_the_status_comment_says_nothing_of_isolation_when_checks_run_isolated(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    assert SAID not in _comment_after_a_pass(fake, tmp_path, "verify_parallel: 2\n")
