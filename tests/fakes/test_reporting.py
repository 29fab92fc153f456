"""Reporting on GitHub: the status comment's wording (golden file), and a publish that costs
the same few requests whatever the number of tasks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.github.client import CUT_NOTE, GitHubClient
from imm_action.github.reporting import ReportTarget, publish_report, status_comment
from imm_action.github.transport import RetryBudget, build_github
from imm_action.integrate.verdict import build_report, verdict
from imm_action.model.outcome import Failure
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState, BatchState
from imm_action.render import job_summary
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
    decided = verdict(state, [])
    return build_report(state, decided, NOW), state.model_copy(
        update={"batch_state": decided.batch_state}
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


def test_where_actions_may_not_open_pull_requests_the_report_links_the_compare_page(
    fake: FakeGitHub,
) -> None:
    fake.repo(REPO).pulls_refused = True
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    report, state = _state(2)
    report = report.model_copy(update={"commits": ["c" * 40]})
    url = f"https://github.example/{REPO}"
    publish_report(client, report, state, ReportTarget(1, "d" * 40, url))
    repo = fake.repo(REPO)
    assert repo.pulls == {}
    compare = f"{url}/compare/{state.base_ref}...{state.branch}"
    (comment,) = repo.comments.values()
    assert compare in comment["body"]
    (check,) = repo.check_runs.values()
    assert compare in check["output"]["summary"]


def _failure(step: str, output: str) -> Failure:
    return Failure(step=step, command="python3 -m pytest", exit_code=1, output_tail=output)


def test_a_report_too_long_for_a_comment_leaves_the_outputs_out_and_is_still_posted(
    fake: FakeGitHub,
) -> None:
    """Twelve parked tasks, each check's output at its 40 lines of 300 characters: some
    140,000 characters, over GitHub's 65,536 for a comment or a pull request's body. The
    outputs go (the job summary and `imm status` keep them); every task and headline stays."""
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    report, state = _state(12)
    output = "\n".join(f"E   line {line}: " + "x" * 285 for line in range(40))[-16_384:]
    children = [
        child.model_copy(update={"failures": [_failure(f"{child.task_id}:ok", output)]})
        for child in report.children
    ]
    report = report.model_copy(update={"children": children, "commits": ["c" * 40]})
    assert len(job_summary(report, state, f"https://github.example/{REPO}")) > 140_000
    publish_report(
        client, report, state, ReportTarget(1, "d" * 40, f"https://github.example/{REPO}")
    )
    repo = fake.repo(REPO)
    (comment,) = repo.comments.values()
    (pull,) = repo.pulls.values()
    (check,) = repo.check_runs.values()
    for body in (comment["body"], pull["body"], check["output"]["summary"]):
        assert len(body) <= 65_535
        for child in report.children:
            assert f"<code>{child.task_id}</code> · {child.task_id}:ok" in body
        assert "output left out" in body


def test_a_report_too_long_even_without_outputs_is_cut_saying_so() -> None:
    report, state = _state(40)
    text = status_comment(report, state, f"https://github.example/{REPO}", limit=2_000)
    assert len(text) <= 2_000
    assert text.endswith(CUT_NOTE)


def test_a_reply_or_pull_request_longer_than_github_takes_is_posted_cut_not_refused(
    fake: FakeGitHub,
) -> None:
    """Several answers in one reply (`/imm status` twice), each near the limit: cut, saying so."""
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    client.reply(1, "<!-- imm-reply:1 -->", "x" * 70_000)
    client.ensure_pull("imm/shop", "main", "imm: shop", "y" * 70_000)
    repo = fake.repo(REPO)
    (comment,) = repo.comments.values()
    (pull,) = repo.pulls.values()
    for body in (comment["body"], pull["body"]):
        assert len(body) == 65_536
        assert body.endswith(CUT_NOTE)


def _broken_intent_repo(tmp_path: Path, problems: int = 1) -> Path:
    import json

    from tests.conftest import initiative_files, intent, make_repo

    files = initiative_files("init", {"a": [], "b": ["a"]})
    extra = {f"colour{index}": "red" for index in range(problems)}
    files["docs/plans/b.intent.json"] = json.dumps({**intent("b"), **extra}, indent=2)
    return make_repo(tmp_path / "r", files)


def _check_report(
    fake: FakeGitHub,
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> int:
    from tests.conftest import run_cli

    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO,
                   "GITHUB_API_URL": fake.url, "GITHUB_SHA": "f" * 40}  # fmt: skip
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    code, _, _ = run_cli(capsys, "check", "--repo", str(repo), "--report")
    return code


def test_imm_check_reports_a_check_run_with_annotations_at_file_and_line(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    code = _check_report(fake, _broken_intent_repo(tmp_path), monkeypatch, capsys)
    assert code == 2
    (run,) = fake.repo(REPO).check_runs.values()
    assert (run["name"], run["conclusion"]) == ("imm: check", "failure")
    assert [
        (a["path"], a["start_line"], a["annotation_level"], a["message"])
        for a in fake.repo(REPO).annotations[run["id"]]
    ] == [("docs/plans/b.intent.json", 18, "failure", "colour0: unknown key")]


def test_imm_check_report_run_twice_on_one_commit_leaves_each_annotation_once(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    repo = _broken_intent_repo(tmp_path, problems=60)  # more than GitHub takes in one request
    assert _check_report(fake, repo, monkeypatch, capsys) == 2
    assert _check_report(fake, repo, monkeypatch, capsys) == 2
    (run,) = fake.repo(REPO).check_runs.values()
    messages = [a["message"] for a in fake.repo(REPO).annotations[run["id"]]]
    assert sorted(messages) == sorted(f"colour{index}: unknown key" for index in range(60))


def test_a_running_check_on_a_commit_the_batch_moved_on_from_is_ended_as_superseded(
    fake: FakeGitHub,
) -> None:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    report, state = _state(3)
    running = {"batch_state": BatchState.RUNNING}
    report, state = report.model_copy(update=running), state.model_copy(update=running)
    url = f"https://github.example/{REPO}"
    first, moved = "a" * 40, "b" * 40
    publish_report(client, report, state, ReportTarget(1, first, url))
    publish_report(client, report, state, ReportTarget(1, moved, url, earlier_heads=(first,)))
    runs = {run["head_sha"]: run for run in fake.repo(REPO).check_runs.values()}
    assert (runs[first]["status"], runs[first]["conclusion"]) == ("completed", "neutral")
    assert runs[first]["output"]["title"].startswith("superseded: imm/")
    assert runs[moved]["status"] == "in_progress"
