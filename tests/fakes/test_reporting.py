"""Reporting on GitHub: the status comment's wording (golden file), and a publish that costs
the same few requests whatever the number of tasks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.github.client import GitHubClient, RetryBudget, build_github
from imm_action.github.reporting import ReportTarget, publish_report, status_comment
from imm_action.integrate.decide import build_report, decide
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState
from tests.batch_helpers import current, make_project, publish, run_pass, work
from tests.conftest import assert_golden
from tests.fake_github import FakeGitHub
from tests.unit.test_transitions import _initial

REPO = "acme/widgets"
NOW = "2026-12-02T10:00:00.000Z"


def _mixed_batch(tmp_path: Path) -> tuple[BatchRunReport, BatchRunState]:
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": ["b"], "d": ["a"]})
    run_pass(repo)
    work(repo, "a")
    publish(repo, "b", None, state="needs_human", reason="QA failure limit reached")
    run_pass(repo)
    stored = current(repo)
    assert stored.report is not None
    return stored.report, stored.state


def test_the_status_comment_reads_as_the_golden_file_says(tmp_path: Path) -> None:
    report, state = _mixed_batch(tmp_path)
    assert_golden(
        "status_comment.md", status_comment(report, state, f"https://github.example/{REPO}")
    )


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO)
        github.state.new_issue(github.repo(REPO), "Initiative", "body", "acme")
        yield github


def _state(tasks: int) -> tuple[BatchRunReport, BatchRunState]:
    state = _initial({f"t{index:03d}": [] for index in range(tasks)})
    verdict = decide(state, [])
    return build_report(state, verdict, NOW), state.model_copy(
        update={"batch_state": verdict.batch_state}
    )


@pytest.mark.parametrize("tasks", [10, 100])
def test_publishing_a_report_costs_at_most_ten_requests_whatever_the_task_count(
    fake: FakeGitHub, tasks: int
) -> None:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    report, state = _state(tasks)
    target = ReportTarget(
        issue_number=1, head_sha="d" * 40, repository_url=f"https://github.example/{REPO}"
    )
    publish_report(client, report, state, target)
    first = len(fake.requests)
    publish_report(client, report, state, target)
    assert first <= 10
    assert len(fake.requests) - first <= 10
    repo = fake.repo(REPO)
    assert len(repo.comments) == 1
    assert len(repo.check_runs) == 1


def test_imm_check_reports_a_check_run_with_annotations_at_file_and_line(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    import io as text_io
    import json

    from imm_action.commands import check
    from imm_action.commands.io import CommandIO
    from tests.conftest import initiative_files, intent, make_repo

    files = initiative_files("init", {"a": [], "b": ["a"]})
    files["docs/plans/b.intent.json"] = json.dumps({**intent("b"), "colour": "red"}, indent=2)
    repo = make_repo(tmp_path / "r", files)
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    sink = text_io.StringIO()
    code = check.run(
        check.CheckArgs(repo, None), CommandIO(sink, sink), check.CheckReport(client, "f" * 40)
    )
    assert code == 2
    (run,) = fake.repo(REPO).check_runs.values()
    assert (run["name"], run["conclusion"]) == ("imm check", "failure")
    assert run["annotations"] == [
        {"path": "docs/plans/b.intent.json", "start_line": 18, "end_line": 18,
         "annotation_level": "failure", "message": "colour: unknown key"}
    ]  # fmt: skip
