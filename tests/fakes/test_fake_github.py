"""The fake GitHub behaves like GitHub for the calls we make — checked through PyGithub's real
HTTP stack, as the product itself will talk to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Auth, BadCredentialsException, Github, GithubException, GithubRetry

from tests.fake_github import FakeGitHub, Fault

REPO = "acme/widgets"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO, {"acme": "admin", "writer": "write", "reader": "read"})
        github.add_workflow(REPO, "imm-batch.yml", "imm batch")
        yield github


def client(fake: FakeGitHub, token: str = "test-token", retries: int = 3) -> Github:
    retry = GithubRetry(total=retries, backoff_factor=0.01, secondary_rate_wait=1)
    return Github(
        auth=Auth.Token(token), base_url=fake.url, retry=retry, timeout=5,
        seconds_between_requests=None, seconds_between_writes=None,
    )  # fmt: skip


def test_issues_and_comments_round_trip(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("Initiative", body="<!-- marker -->\nbody")
    comment = issue.create_comment("first")
    comment.edit("edited")
    assert [c.body for c in repo.get_issue(issue.number).get_comments()] == ["edited"]
    assert issue.user.login == "imm-bot"
    issue.edit(state="closed")
    assert repo.get_issue(issue.number).state == "closed"


def test_lists_are_paginated_with_link_headers(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("many comments")
    for index in range(7):
        issue.create_comment(f"c{index}")
    gh = Github(auth=Auth.Token("test-token"), base_url=fake.url, per_page=3,
                seconds_between_requests=None, seconds_between_writes=None)  # fmt: skip
    bodies = [c.body for c in gh.get_repo(REPO).get_issue(issue.number).get_comments()]
    assert bodies == [f"c{index}" for index in range(7)]
    assert len(fake.requests_to("GET", r"/repos/acme/widgets/issues/1/comments")) == 3


def test_bad_credentials_and_missing_things_answer_as_github_does(fake: FakeGitHub) -> None:
    with pytest.raises(BadCredentialsException):
        client(fake, token="wrong").get_repo(REPO)
    with pytest.raises(GithubException) as missing:
        client(fake).get_repo("acme/nope")
    assert (missing.value.status, missing.value.data["message"]) == (404, "Not Found")
    with pytest.raises(GithubException) as invalid:
        client(fake).get_repo(REPO).create_issue("")
    assert invalid.value.status == 422
    assert invalid.value.data["errors"][0]["code"] == "missing_field"


def test_reactions_check_runs_statuses_and_permissions(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    comment = repo.create_issue("x").create_comment("/imm status")
    comment.create_reaction("eyes")
    comment.create_reaction("eyes")  # GitHub answers 200 with the existing reaction
    assert len(fake.repo(REPO).reactions[comment.id]) == 1
    sha = "a" * 40
    run = repo.create_check_run(name="imm: shop", head_sha=sha, status="in_progress")
    run.edit(conclusion="success", output={"title": "done", "summary": "all integrated"})
    assert [(r.status, r.conclusion) for r in repo.get_commit(sha).get_check_runs()] == [
        ("completed", "success")
    ]
    repo.get_commit(sha).create_status("failure", description="parked", context="imm: shop")
    assert repo.get_collaborator_permission("writer") == "write"
    assert repo.get_collaborator_permission("stranger") == "read"


def test_check_runs_can_be_refused_like_a_token_without_checks_write(fake: FakeGitHub) -> None:
    fake.repo(REPO).check_runs_refused = True
    with pytest.raises(GithubException) as refused:
        client(fake).get_repo(REPO).create_check_run(name="imm", head_sha="b" * 40)
    assert refused.value.status == 403


def test_a_second_pull_request_for_the_same_branch_is_refused(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(REPO)
    repo.create_pull(title="imm: shop", body="report", head="imm/shop", base="main")
    with pytest.raises(GithubException) as duplicate:
        repo.create_pull(title="again", body="", head="imm/shop", base="main")
    assert "A pull request already exists for acme:imm/shop." in str(duplicate.value.data)
    assert [p.title for p in repo.get_pulls(head="acme:imm/shop", base="main")] == ["imm: shop"]


def test_a_body_over_65536_characters_is_refused_as_github_does(fake: FakeGitHub) -> None:
    """GitHub's OpenAPI description states no limit; GitHub answers 422 all the same."""
    repo = client(fake).get_repo(REPO)
    issue = repo.create_issue("Initiative", body="x" * 65_536)
    too_long = "x" * 65_537
    refusals = [
        lambda: issue.create_comment(too_long),
        lambda: issue.create_comment("short").edit(too_long),
        lambda: repo.create_issue("another", body=too_long),
        lambda: issue.edit(body=too_long),
        lambda: repo.create_pull(title="imm: shop", body=too_long, head="imm/shop", base="main"),
    ]
    for refused in refusals:
        with pytest.raises(GithubException) as error:
            refused()
        assert error.value.status == 422
        assert "body is too long (maximum is 65536 characters)" in str(error.value.data)
    pull = repo.create_pull(title="imm: shop", body="report", head="imm/shop", base="main")
    with pytest.raises(GithubException):
        pull.edit(body=too_long)


def test_workflow_dispatch_records_its_inputs(fake: FakeGitHub) -> None:
    workflow = client(fake).get_repo(REPO).get_workflow("imm-batch.yml")
    assert workflow.create_dispatch("main", {"initiative": "shop", "max_parallel": "4"})
    assert fake.repo(REPO).dispatches == [
        {"workflow": ".github/workflows/imm-batch.yml", "ref": "main",
         "inputs": {"initiative": "shop", "max_parallel": "4"}}
    ]  # fmt: skip


def test_a_dispatch_with_an_input_the_workflow_does_not_declare_is_refused(
    fake: FakeGitHub,
) -> None:
    fake.add_workflow(REPO, "declared.yml", "declared", inputs={"initiative": True, "pass": False})
    workflow = client(fake).get_repo(REPO).get_workflow("declared.yml")
    # PyGithub answers False for anything but 204
    assert workflow.create_dispatch("main", {"initiative": "shop", "batch_id": "b"}) is False
    assert fake.requests[-1].status == 422
    assert fake.repo(REPO).dispatches == []


def test_a_dispatch_without_a_required_input_is_refused(fake: FakeGitHub) -> None:
    fake.add_workflow(REPO, "declared.yml", "declared", inputs={"initiative": True})
    workflow = client(fake).get_repo(REPO).get_workflow("declared.yml")
    assert workflow.create_dispatch("main", {}) is False
    assert fake.requests[-1].status == 422
    assert fake.repo(REPO).dispatches == []


def test_server_errors_are_retried_for_reads(fake: FakeGitHub) -> None:
    fake.faults.queue(Fault.SERVER_ERROR, Fault.BAD_GATEWAY)
    assert client(fake).get_repo(REPO).full_name == REPO
    assert [r.status for r in fake.requests] == [500, 502, 200]


def test_a_secondary_rate_limit_with_retry_after_is_waited_out(fake: FakeGitHub) -> None:
    fake.faults.queue(Fault.SECONDARY_RATE_LIMIT)
    assert client(fake).get_repo(REPO).name == "widgets"
    assert [r.status for r in fake.requests] == [403, 200]


def test_a_dropped_connection_surfaces_or_is_retried(fake: FakeGitHub) -> None:
    fake.faults.queue(Fault.RESET)
    assert client(fake).get_repo(REPO).name == "widgets"
    assert fake.requests[0].fault is Fault.RESET


def test_every_response_carries_rate_limit_headers(fake: FakeGitHub) -> None:
    gh = client(fake)
    gh.get_repo(REPO)
    remaining, limit = gh.rate_limiting
    assert limit == 5000
    assert remaining < 5000
