"""Event parsing against GitHub's published webhook examples (vendored), changing only the
fields each test needs — including fields that are null or absent in real events."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.carriers.github import issue_reference
from imm_action.errors import InputError
from imm_action.github.events import (
    IssueCommentEvent,
    PullRequestEvent,
    WorkflowDispatchEvent,
    read_event,
)
from tests.webhook_examples import example, write_example

MARKER = "<!-- immune-brain:initiative-id=shop -->"


def test_an_issue_comment_from_githubs_example_reads_its_comment_and_initiative(
    tmp_path: Path,
) -> None:
    path = write_example(tmp_path / "e.json", "issue_comment.created", issue__body=f"{MARKER}\nx")
    event = read_event(path)
    original = example("issue_comment.created")
    assert (event.action, event.comment.id) == ("created", original["comment"]["id"])
    assert event.comment.body == original["comment"]["body"]
    assert event.sender.login == original["sender"]["login"] == "Codertocat"
    assert event.repository.full_name == "Codertocat/Hello-World"
    assert event.initiative == "shop"
    assert not event.on_pull_request


@pytest.mark.parametrize("nth", [0, 1])
def test_a_comment_a_person_wrote_has_no_app_whether_the_field_is_absent_or_null(
    tmp_path: Path, nth: int
) -> None:
    event = read_event(write_example(tmp_path / "e.json", "issue_comment.created", nth))
    assert event.comment.performed_via_github_app is None


def test_a_comment_posted_by_an_app_names_the_app(tmp_path: Path) -> None:
    app = {"id": 1, "slug": "imm-bot", "name": "imm", "owner": None}
    path = write_example(
        tmp_path / "e.json", "issue_comment.created", 1, comment__performed_via_github_app=app
    )
    app_of = read_event(path).comment.performed_via_github_app
    assert app_of is not None
    assert app_of.slug == "imm-bot"


def test_a_comment_on_a_pull_request_carries_the_issue_pull_request_link(tmp_path: Path) -> None:
    link = {"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
            "html_url": "https://github.com/Codertocat/Hello-World/pull/1",
            "diff_url": None, "patch_url": None, "merged_at": None}  # fmt: skip
    path = write_example(tmp_path / "e.json", "issue_comment.created", issue__pull_request=link)
    event = read_event(path)
    assert event.on_pull_request
    assert event.initiative is None  # a PR body carries no tracker marker


def test_an_issue_without_a_body_carries_no_initiative(tmp_path: Path) -> None:
    path = write_example(tmp_path / "e.json", "issue_comment.created", issue__body=None)
    assert read_event(path).initiative is None


@pytest.mark.parametrize("name", ["pull_request.opened", "pull_request.synchronize"])
def test_a_pull_request_event_reads_its_head_and_base(tmp_path: Path, name: str) -> None:
    original = example(name)
    event = read_event(write_example(tmp_path / "e.json", name), PullRequestEvent)
    assert event.number == original["number"]
    assert event.pull_request.head.sha == original["pull_request"]["head"]["sha"]
    assert event.pull_request.base.ref == original["pull_request"]["base"]["ref"]


def test_a_synchronize_names_the_head_before_and_after_the_push(tmp_path: Path) -> None:
    original = example("pull_request.synchronize")
    path = write_example(tmp_path / "e.json", "pull_request.synchronize")
    event = read_event(path, PullRequestEvent)
    assert (event.before, event.after) == (original["before"], original["after"])
    assert event.after == event.pull_request.head.sha


def test_a_workflow_dispatch_reads_an_initiative_input_naming_an_issue(tmp_path: Path) -> None:
    inputs = {"initiative": "#123", "max_parallel": "4", "dry_run": False}
    path = write_example(tmp_path / "e.json", "workflow_dispatch", inputs=inputs)
    event = read_event(path, WorkflowDispatchEvent)
    assert event.ref == example("workflow_dispatch")["ref"]
    initiative = event.input("initiative")
    assert initiative is not None
    assert issue_reference(initiative) == 123
    assert event.input("dry_run") == "False"
    assert event.input("absent") is None


def test_a_workflow_dispatch_without_inputs_has_none(tmp_path: Path) -> None:
    event = read_event(
        write_example(tmp_path / "e.json", "workflow_dispatch"), WorkflowDispatchEvent
    )
    assert event.input("initiative") is None


def test_an_event_of_another_kind_is_refused_naming_the_kind_expected(tmp_path: Path) -> None:
    path = write_example(tmp_path / "e.json", "workflow_dispatch")
    with pytest.raises(InputError, match="not an issue_comment event"):
        read_event(path, IssueCommentEvent)
    with pytest.raises(InputError, match="not a pull_request event"):
        read_event(path, PullRequestEvent)
