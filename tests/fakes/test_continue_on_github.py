"""`/imm run` on GitHub continues a stopped batch (SPEC §5.7): the comment dispatches the batch
workflow; its plan job continues the batch with what was fixed; lanes run the real executor and
the real descriptors; one status comment, edited in place, tells the story to the end."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.batches.operations import RepoBatchOperations
from imm_action.carriers.github import GitHubSource
from imm_action.carriers.source import Initiatives
from imm_action.commands import command, lane, reconcile
from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.reporting import status_marker
from imm_action.github.transport import RetryBudget, build_github
from imm_action.model.state import ChildState
from imm_action.ports import Ports
from tests.batch_helpers import current, file_check, make_project
from tests.conftest import git, intent
from tests.fake_github import FakeGitHub
from tests.integration.test_local_run import EXECUTOR
from tests.webhook_examples import example

REPO = "acme/widgets"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO, {"acme": "admin", "writer": "write"})
        github.add_workflow(REPO, "imm-batch.yml")
        yield github


@pytest.fixture(autouse=True)
def behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "behaviour.json"
    path.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))


def _client(fake: FakeGitHub) -> GitHubClient:
    return GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))


def _initiatives(fake: FakeGitHub, repo: Path) -> Initiatives:
    return Initiatives(repo, GitHubSource(_client(fake), REPO, str(fake.repo(REPO).id)))


def _arrange(fake: FakeGitHub, tmp_path: Path) -> tuple[Path, int]:
    """a, then b (its check wants text its executor never writes), carried by an issue."""
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]},
                        checks={"b": file_check("b.txt", "bee")})  # fmt: skip
    git(repo, "rm", "-q", "docs/initiatives/init.md")
    git(repo, "commit", "-qm", "The initiative lives in its issue")
    parent = fake.add_tracker_initiative(REPO, "init")
    a = fake.add_tracker_task(REPO, parent, "init", "a")
    b = fake.add_tracker_task(REPO, parent, "init", "b")
    fake.link_blocked_by(REPO, b, a)
    return repo, parent


def _workflow(fake: FakeGitHub, repo: Path, *, continue_stopped: bool) -> None:
    """What the batch workflow's jobs do: plan (admit), lanes (`imm lane`), integrate — until
    nothing more can start."""
    sink = io.StringIO()
    reporting = reconcile.GitHubReporting(_client(fake), f"https://github.example/{REPO}")
    for round_ in range(6):
        plan_job = continue_stopped and round_ == 0  # a person's dispatch, not a continuation
        args = reconcile.ReconcileArgs(
            "init", repo, None, True, None, "text", os.environ["PATH"], continue_stopped=plan_job
        )
        ports = reconcile.ReconcilePorts(CommandIO(sink, sink), _initiatives(fake, repo), reporting)
        reconcile.run(args, ports)
        state = current(repo).state
        admitted = [c.task_id for c in state.children if c.state is ChildState.LANE_ADMITTED]
        if not admitted:
            return
        for task in admitted:
            lane_args = lane.LaneArgs(state.batch_id, task, repo, None, EXECUTOR, None,
                                      dict(os.environ))  # fmt: skip
            lane.run(lane_args, Ports(CommandIO(sink, sink), _initiatives(fake, repo)))
        integrate = reconcile.ReconcileArgs("init", repo, state.batch_id, False, None, "text",
                                            os.environ["PATH"])  # fmt: skip
        reconcile.run(integrate, ports)
    pytest.fail("the workflow did not settle")


def _comment_run(fake: FakeGitHub, tmp_path: Path, repo: Path, issue: int) -> None:
    gh = fake.repo(REPO)
    posted = fake.state.new_comment(gh, gh.issues[issue], "/imm run", "writer")
    payload = example("issue_comment.created")
    payload["comment"] |= {"id": posted["id"], "body": "/imm run"}
    payload["comment"]["user"]["login"] = payload["sender"]["login"] = "writer"
    payload["issue"] |= {"number": issue, "body": gh.issues[issue]["body"]}
    payload["repository"] |= {"full_name": REPO, "default_branch": "main"}
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    ops = RepoBatchOperations(repo, None, os.environ["PATH"], _initiatives(fake, repo))
    sink = io.StringIO()
    ports = command.CommandPorts(CommandIO(sink, sink), _client(fake), lambda: ops)
    assert command.run(command.CommandArgs(event, "write"), ports) == 0


def _status_comments(fake: FakeGitHub) -> list[dict[str, object]]:
    comments = fake.repo(REPO).comments.values()
    return [c for c in comments if str(c["body"]).startswith(status_marker("init"))]


def test_imm_run_in_a_comment_continues_a_stopped_batch_and_edits_one_status_comment(
    fake: FakeGitHub, tmp_path: Path
) -> None:
    repo, issue = _arrange(fake, tmp_path)
    _workflow(fake, repo, continue_stopped=True)
    stopped = current(repo).state
    assert [str(c.state) for c in stopped.children] == ["integrated", "needs_human"]
    (comment,) = _status_comments(fake)
    assert "is needs_human" in str(comment["body"])
    assert "/imm run" in str(comment["body"])  # the next command, as one types it here
    a_commit = stopped.children[0].commit

    fixed = intent("b", scope_hint=["b.txt"], acceptance=[
        {"id": "ok", "assertion": "b works", "verification": file_check("b.txt", "b")}
    ])  # fmt: skip
    (repo / "docs/plans/b.intent.json").write_text(json.dumps(fixed, indent=2) + "\n")
    git(repo, "commit", "-qam", "Fix b's check")
    _comment_run(fake, tmp_path, repo, issue)
    assert fake.repo(REPO).dispatches[-1]["inputs"] == {"initiative": "init"}
    _workflow(fake, repo, continue_stopped=True)  # the dispatched run's plan job continues

    state = current(repo).state
    assert state.batch_state == "completed"
    assert state.continues is not None
    assert state.continues.batch_id == stopped.batch_id
    assert state.children[0].commit == a_commit
    (edited,) = _status_comments(fake)
    assert edited["id"] == comment["id"]
    body = str(edited["body"])
    assert "is completed" in body
    assert f"continues {stopped.batch_id}: 1 task already integrated, plan changed: b" in body
