"""`imm command`: a comment's `/imm` lines answered through the fake GitHub, with the
permission checked through the API and comment text treated as plain text."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from imm_action.batches.operations import RepoBatchOperations
from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.carriers.github import GitHubSource
from imm_action.carriers.source import Initiatives
from imm_action.commands import command
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from imm_action.lanes.github import GitHubRun
from imm_action.passes.driver import reconcile
from tests.batch_helpers import current, make_project, open_local, publish, run_pass
from tests.conftest import assert_golden
from tests.fake_github import FakeGitHub
from tests.webhook_examples import example

REPO = "acme/widgets"
INITIATIVE_BODY = "<!-- immune-brain:initiative-id=init -->\nThe initiative."


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO, {"acme": "admin", "writer": "write", "reader": "read"})
        github.add_workflow(REPO, "imm-batch.yml")
        github.state.new_issue(github.repo(REPO), "Initiative init", INITIATIVE_BODY, "acme")
        yield github


def _event(tmp_path: Path, fake: FakeGitHub, body: str, login: str, issue: int = 1) -> Path:
    repo = fake.repo(REPO)
    posted = fake.state.new_comment(repo, repo.issues[issue], body, login)
    payload = example("issue_comment.created")
    payload["comment"] |= {"id": posted["id"], "body": body}
    payload["comment"]["user"]["login"] = payload["sender"]["login"] = login
    payload["issue"] |= {"number": issue, "body": repo.issues[issue]["body"]}
    payload["repository"] |= {"full_name": REPO, "default_branch": "main"}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


def _handle(fake: FakeGitHub, event: Path, project: Path | None = None) -> int:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    where = project or Path(".")
    issues = GitHubSource(client, REPO, str(fake.repo(REPO).id))
    ops = RepoBatchOperations(where, None, "/usr/bin:/bin", Initiatives(where, issues))
    sink = io.StringIO()
    ports = command.CommandPorts(CommandIO(sink, sink), client, lambda: ops)
    return command.run(command.CommandArgs(event, "write"), ports)


def _replies(fake: FakeGitHub) -> list[str]:
    return [c["body"] for c in fake.repo(REPO).comments.values() if c["user"]["login"] == "imm-bot"]


def test_a_writer_starts_the_batch_by_dispatching_the_workflow(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    assert _handle(fake, _event(tmp_path, fake, "/imm run --max-parallel 2", "writer")) == 0
    assert fake.repo(REPO).dispatches == [
        {"workflow": ".github/workflows/imm-batch.yml", "ref": "main",
         "inputs": {"initiative": "init", "max_parallel": "2"}}
    ]  # fmt: skip
    reactions = [r["content"] for rs in fake.repo(REPO).reactions.values() for r in rs]
    assert reactions == ["eyes"]
    run_id = max(fake.repo(REPO).runs)
    url = f"https://github.example/{REPO}/actions/runs/{run_id}"
    assert (
        f"Started the batch of `init`: [run {run_id}]({url}) of imm-batch.yml" in _replies(fake)[0]
    )


def test_a_user_without_write_permission_is_refused_and_nothing_runs(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    assert _handle(fake, _event(tmp_path, fake, "/imm run\n/imm cancel", "reader")) == 0
    assert fake.repo(REPO).dispatches == []
    (reply,) = _replies(fake)
    assert_golden("reply_refusal.md", reply)
    assert fake.requests_to("GET", r"/repos/acme/widgets/collaborators/reader/permission")


def test_shell_and_expression_syntax_in_a_comment_is_plain_text(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    body = (
        "/imm retry $(touch /tmp/imm-pwned)\n/imm run ${{ secrets.GITHUB_TOKEN }}\n/imm `id`\nline"
    )
    assert _handle(fake, _event(tmp_path, fake, body, "writer")) == 0
    assert fake.repo(REPO).dispatches == []
    assert not Path("/tmp/imm-pwned").exists()
    (reply,) = _replies(fake)
    assert_golden("reply_unknown_commands.md", reply)


def test_a_comment_without_commands_gets_no_answer(fake: FakeGitHub, tmp_path: Path) -> None:
    assert _handle(fake, _event(tmp_path, fake, "> /imm cancel\nthanks!", "writer")) == 0
    assert _replies(fake) == []
    assert fake.requests == []  # not even a permission check


def test_status_and_plan_answer_from_the_repository(fake: FakeGitHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", {"a": [], "b": ["a"]})
    assert _handle(fake, _event(tmp_path, fake, "/imm plan\n/imm status", "writer"), project) == 0
    (reply,) = _replies(fake)
    assert "# Plan for `init`" in reply
    assert "`init` has no batch yet" in reply


def test_the_plan_reply_names_what_gates_every_move(fake: FakeGitHub, tmp_path: Path) -> None:
    """Before `/imm run`, the reviewer reads which branch checks every move must pass."""
    config = "branch_checks:\n  - name: suite\n    command: python3 -m pytest -q\n"
    project = make_project(tmp_path / "project", {"a": []}, extra_files={".github/imm.yml": config})
    assert _handle(fake, _event(tmp_path, fake, "/imm plan", "writer"), project) == 0
    (reply,) = _replies(fake)
    assert "## What gates every move of `imm/init`" in reply
    assert "- `branch:suite`: `python3 -m pytest -q`" in reply


def test_plan_answers_with_the_plan_of_an_initiative_kept_on_github(
    fake: FakeGitHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.conftest import initiative_files, make_repo, run_cli

    files = initiative_files("gh", {"a": [], "b": ["a"]})
    del files["docs/initiatives/gh.md"]  # kept on GitHub only
    project = make_repo(tmp_path / "project", files)
    tracker = fake.add_tracker_initiative(REPO, "gh")
    first = fake.add_tracker_task(REPO, tracker, "gh", "a")
    fake.link_blocked_by(REPO, fake.add_tracker_task(REPO, tracker, "gh", "b"), first)
    fake.hide_from_search(REPO, tracker)  # the event names the issue: no search is needed
    event = _event(tmp_path, fake, "/imm plan", "writer", issue=tracker)
    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO}
    environment |= {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY_ID": str(fake.repo(REPO).id)}
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    code, _, _ = run_cli(capsys, "command", "--event", str(event), "--repo", str(project))
    assert code == 0
    (reply,) = _replies(fake)
    assert "# Plan for `gh`" in reply
    assert "no GitHub repository is configured" not in reply
    assert len(fake.requests_to("POST", "/graphql")) == 1  # read by the event's issue number


def _parked(tmp_path: Path) -> Path:
    """A project whose batch waits on a person: `a` parked, `b` (after `a`) skipped."""
    project = make_project(tmp_path / "project", {"a": [], "b": ["a"]})
    run_pass(project)
    publish(project, "a", None, state="needs_human", reason="QA failure limit reached")
    run_pass(project)
    assert current(project).state.batch_state == "needs_human"
    return project


def test_a_retry_with_no_run_going_starts_one_and_names_it(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    project = _parked(tmp_path)
    assert _handle(fake, _event(tmp_path, fake, "/imm retry a", "writer"), project) == 0
    batch_id = current(project).state.batch_id
    assert fake.repo(REPO).dispatches == [
        {"workflow": ".github/workflows/imm-batch.yml", "ref": "main",
         "inputs": {"initiative": "init", "batch_id": batch_id}}
    ]  # fmt: skip
    run_id = max(fake.repo(REPO).runs)
    reply = _replies(fake)[0]
    assert "Done: `retry a`" in reply
    assert f"No run was going: started [run {run_id}](" in reply


def test_a_refused_retry_starts_no_run(fake: FakeGitHub, tmp_path: Path) -> None:
    project = _parked(tmp_path)
    assert _handle(fake, _event(tmp_path, fake, "/imm retry b", "writer"), project) == 0
    assert "`retry b` was refused" in _replies(fake)[0]
    assert fake.repo(REPO).dispatches == []


def test_cancel_cancels_the_runs_carrying_the_lanes_and_says_so(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "project", {"a": [], "b": []})
    run_id = fake.add_run(REPO)
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    lanes = GitHubRun(client, run_id, 1).lanes(timedelta(minutes=30))
    batch_repo = open_local(project)
    request = pass_request(batch_repo, "init", batch_id=None, admit=True)
    reconcile(request, pass_ports(batch_repo, lambda line: None, path_env="/usr/bin:/bin",
                                  lanes=lanes))  # fmt: skip
    assert _handle(fake, _event(tmp_path, fake, "/imm cancel", "writer"), project) == 0
    run = fake.repo(REPO).runs[run_id]
    assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
    assert f"Cancelled run {run_id}, which carried its lanes." in _replies(fake)[0]
    assert current(project).state.batch_state == "cancelled"
