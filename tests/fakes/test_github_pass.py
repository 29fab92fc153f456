"""A reconcile pass on GitHub: the initiative read from its issue, the report published — the
request count stays small and flat as the initiative grows, and faults do not duplicate."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from imm_action.carriers.github import GitHubSource
from imm_action.carriers.source import Initiatives
from imm_action.commands import reconcile
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from tests.batch_helpers import publish
from tests.conftest import initiative_files, make_repo
from tests.fake_github import FakeGitHub, Fault
from tests.integration.test_sandbox import _namespaces_work

REPO = "acme/widgets"


def _arrange(fake: FakeGitHub, tmp_path: Path, tasks: int, config: str | None = None) -> Path:
    ids = [f"t{index:03d}" for index in range(tasks)]
    files = initiative_files("big", {task: [] for task in ids})
    del files["docs/initiatives/big.md"]  # carried by the GitHub issue instead
    if config is not None:
        files[".github/imm.yml"] = config
    repo = make_repo(tmp_path / "repo", files)
    parent = fake.add_tracker_initiative(REPO, "big")
    for task in ids:
        fake.add_tracker_task(REPO, parent, "big", task)
    return repo


def _pass(fake: FakeGitHub, repo: Path, admit: bool = True) -> int:
    client = GitHubClient(
        build_github("test-token", fake.url), REPO, RetryBudget(attempts=12, max_wait=0.01)
    )
    reporting = reconcile.GitHubReporting(client, f"https://github.example/{REPO}")
    initiatives = Initiatives(repo, GitHubSource(client, REPO, str(fake.repo(REPO).id)))
    args = reconcile.ReconcileArgs("big", repo, None, admit, None, "text", os.environ["PATH"])
    sink = io.StringIO()
    before = len(fake.requests)
    reconcile.run(args, reconcile.ReconcilePorts(CommandIO(sink, sink), initiatives, reporting))
    return len(fake.requests) - before


@pytest.mark.parametrize("tasks", [10, 100])
def test_a_pass_with_reporting_costs_at_most_ten_requests(
    fake: FakeGitHub, tmp_path: Path, tasks: int
) -> None:
    repo = _arrange(fake, tmp_path, tasks)
    first = _pass(fake, repo)
    again = _pass(fake, repo)
    assert first <= 10
    assert again <= 10
    gh_repo = fake.repo(REPO)
    assert len(gh_repo.comments) == 1
    assert "imm: `big` is running" in next(iter(gh_repo.comments.values()))["body"]


def test_passes_under_faults_leave_one_comment_one_pr_and_one_check(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = _arrange(fake, tmp_path, 3)
    fake.faults.randomly(0.3, (Fault.SERVER_ERROR, Fault.SECONDARY_RATE_LIMIT, Fault.RESET,
                               Fault.RESET_AFTER_WRITE), seed=11)  # fmt: skip
    _pass(fake, repo)
    for task in ("t000", "t001", "t002"):
        publish(repo, task, None, slug="big", state="needs_human", reason="parked for the test")
        _pass(fake, repo)
    fake.faults.clear()
    gh_repo = fake.repo(REPO)
    assert len(gh_repo.comments) == 1
    assert len(gh_repo.check_runs) == 1
    (run,) = gh_repo.check_runs.values()
    assert run["conclusion"] == "action_required"
    assert len(fake.faults.injected) >= 3


def test_integrated_tasks_issues_are_closed_when_configured(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    from tests.batch_helpers import work
    from tests.conftest import git

    repo = _arrange(fake, tmp_path, 2)
    (repo / ".github").mkdir()
    (repo / ".github/imm.yml").write_text("close_integrated_issues: true\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "close issues")
    _pass(fake, repo)
    work(repo, "t000", {"src/t000/done.txt": "done\n"}, slug="big")  # inside its scope
    _pass(fake, repo, admit=False)
    states = {issue["title"]: issue["state"] for issue in fake.repo(REPO).issues.values()}
    assert states["t000"] == "closed"
    assert states["t001"] == "open"
    assert states["Initiative big"] == "open"


def test_a_later_pass_reads_the_initiative_by_the_issue_number_the_batch_recorded(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo = _arrange(fake, tmp_path, 100)
    _pass(fake, repo)
    assert len(fake.requests_to("POST", "/graphql")) == 2  # search, then the read by number
    (number,) = fake.repo(REPO).sub_issues  # the tracker issue, parent of the tasks
    fake.hide_from_search(REPO, number)  # even if search lost it, the number is known
    before = len(fake.requests_to("POST", "/graphql"))
    _pass(fake, repo)
    assert len(fake.requests_to("POST", "/graphql")) - before == 1


UNISOLATED = "Checks run unconfined"


def test_the_status_comment_says_checks_run_unconfined_under_sandbox_none(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    _pass(fake, _arrange(fake, tmp_path, 1, config="sandbox: none\n"))
    (comment,) = fake.repo(REPO).comments.values()
    assert UNISOLATED in comment["body"]
    assert "sandbox: none" in comment["body"]


@pytest.mark.skipif(not _namespaces_work(), reason="the kernel refuses namespaces")
def test_the_status_comment_says_nothing_of_isolation_when_checks_run_isolated(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    _pass(fake, _arrange(fake, tmp_path, 1))
    (comment,) = fake.repo(REPO).comments.values()
    assert UNISOLATED not in comment["body"]
