"""Contract: every response shape of the fake GitHub that our code relies on validates against
GitHub's official OpenAPI description. The fake is only worth trusting if it answers like GitHub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
from tests.fake_github import FakeGitHub
from tests.fakes.github_openapi import request_problems, validator

REPO = "acme/widgets"
SHA = "e" * 40


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO, {"acme": "admin", "writer": "write"})
        github.add_workflow(REPO, "imm-batch.yml")
        yield github


def exercise_every_route(fake: FakeGitHub) -> None:
    client = GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))
    gh = build_github("test-token", fake.url)
    repo = gh.get_repo(REPO)
    repo.full_name  # noqa: B018 - a lazy repository: reading it fetches it
    issue = repo.create_issue("Initiative", body="body")
    list(repo.get_issues())
    repo.get_issue(issue.number).edit(body="edited")
    comment = client.upsert_comment(issue.number, "<!-- m -->", "first")
    client.upsert_comment(issue.number, "<!-- m -->", "second")
    repo.get_issue(issue.number).get_comment(comment.id).body  # noqa: B018
    client.react(issue.number, comment.id, "eyes")
    client.report_check(SHA, "imm: x", conclusion=None, title="running", summary="s")
    annotation = {"path": "a.md", "start_line": 1, "end_line": 1,
                  "annotation_level": "warning", "message": "m"}  # fmt: skip
    client.report_check(
        SHA, "imm: x", conclusion="success", title="done", summary="s", annotations=[annotation]
    )
    client.report_check(
        SHA, "imm: x", conclusion="success", title="done", summary="s", annotations=[annotation]
    )
    repo.get_commit(SHA).create_status("success", description="ok", context="imm: x")
    client.ensure_pull("imm/x", "main", "imm: x", "report")
    client.ensure_pull("imm/x", "main", "imm: x", "report 2")
    client.permission("writer")
    gh.get_user().login  # noqa: B018 - the token's own user, asked when a person wrote a marker
    client.dispatch("imm-batch.yml", "main", {"initiative": "x"})
    runs = list(repo.get_workflow_runs())
    job = fake.add_job(REPO, runs[0].id, "lane (x)")
    fake.move_job(REPO, job, "in_progress")
    fake.add_job(REPO, runs[0].id, "lane (y)")
    list(runs[0].jobs())
    assert [j.name for j in client.run_jobs(runs[0].id) or []] == ["lane (x)", "lane (y)"]
    fake.move_job(REPO, job, "completed", "failure")
    client.run_jobs(runs[0].id)
    repo.get_workflow_run(runs[0].id).status  # noqa: B018 - a lazy run: reading it fetches it
    runs[0].cancel()
    client.close_issue(issue.number)


def test_every_response_validates_against_githubs_openapi_description(fake: FakeGitHub) -> None:
    exercise_every_route(fake)
    checked: set[tuple[str, str, int]] = set()
    problems: list[str] = []
    for served in fake.served:
        check = validator(served.template, served.method, served.status)
        checked.add((served.method, served.template, served.status))
        if check is None:
            continue
        for error in check.iter_errors(served.payload):
            where = "/".join(map(str, error.absolute_path)) or "(body)"
            operation = f"{served.method} {served.template} {served.status}"
            problems.append(f"{operation} at {where}: {error.message[:200]}")
    assert not problems, "\n".join(sorted(set(problems))[:60])
    assert len(checked) >= 20  # the operations this product calls


def test_every_rest_call_the_product_makes_is_a_documented_operation(fake: FakeGitHub) -> None:
    exercise_every_route(fake)
    calls = [r for r in fake.requests if r.path != "/graphql"]
    assert any(call.query for call in calls)  # query parameters are checked too
    assert any(call.body for call in calls)  # and JSON bodies
    problems = [p for c in calls for p in request_problems(c.method, c.path, c.query, c.body)]
    assert problems == []


def test_an_undocumented_route_parameter_or_body_is_named() -> None:
    assert request_problems("GET", "/repos/a/b/nothing", "", b"") == [
        "GET /repos/a/b/nothing: no such operation in GitHub's OpenAPI description"
    ]
    assert request_problems("GET", "/repos/a/b/issues", "state=all&bogus=1", b"") == [
        "GET /repos/a/b/issues?state=all&bogus=1: /repos/{owner}/{repo}/issues "
        "has no query parameter 'bogus'"
    ]
    (problem, *_) = request_problems("PATCH", "/repos/a/b/check-runs/5", "", b'{"status": "x"}')
    assert problem.startswith("PATCH /repos/a/b/check-runs/5: body at status: 'x' is not one of")
