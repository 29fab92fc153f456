"""Our GitHub client against the fake GitHub: upserts never duplicate, faults are survived
within a budget, and a budget that runs out says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imm_action.github.client import GitHubClient
from imm_action.github.transport import (
    DispatchRefusedError,
    GitHubAuthError,
    GitHubUnavailableError,
    RetryBudget,
    allows,
    build_github,
)
from tests.fake_github import FakeGitHub, Fault

REPO = "acme/widgets"
MARKER = "<!-- imm-status:shop -->"
SHA = "c" * 40
FAULTS = (Fault.SERVER_ERROR, Fault.BAD_GATEWAY, Fault.SECONDARY_RATE_LIMIT, Fault.RESET,
          Fault.RESET_AFTER_WRITE, Fault.TOO_MANY_REQUESTS)  # fmt: skip


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO, {"acme": "admin", "writer": "write", "triager": "triage"})
        github.add_workflow(REPO, "imm-batch.yml")
        github.state.new_issue(github.repo(REPO), "Initiative shop", "body", "acme")
        yield github


def make_client(fake: FakeGitHub, budget: RetryBudget | None = None) -> GitHubClient:
    budget = budget or RetryBudget(attempts=12, seconds=60, max_wait=0.05)
    return GitHubClient(build_github("test-token", fake.url, timeout=5), REPO, budget)


def test_the_status_comment_is_created_once_and_then_edited_in_place(fake: FakeGitHub) -> None:
    client = make_client(fake)
    client.upsert_comment(1, MARKER, "running")
    client.upsert_comment(1, MARKER, "completed")
    comments = list(fake.repo(REPO).comments.values())
    assert [c["body"] for c in comments] == [f"{MARKER}\ncompleted"]


def test_an_unchanged_comment_is_not_rewritten(fake: FakeGitHub) -> None:
    client = make_client(fake)
    client.upsert_comment(1, MARKER, "same")
    client.upsert_comment(1, MARKER, "same")
    assert fake.requests_to("PATCH", r".*/issues/comments/\d+") == []


def test_a_lost_response_to_a_create_does_not_duplicate_the_comment(fake: FakeGitHub) -> None:
    client = make_client(fake)
    fake.faults.queue(Fault.RESET_AFTER_WRITE)  # the GET of the issue: harmless
    fake.faults.queue(Fault.RESET_AFTER_WRITE, Fault.RESET_AFTER_WRITE)
    client.upsert_comment(1, MARKER, "hello")
    assert len(fake.repo(REPO).comments) == 1


def test_under_30_percent_faults_a_series_of_passes_leaves_one_comment_and_one_pr(
    fake: FakeGitHub,
) -> None:
    client = make_client(fake)
    fake.faults.randomly(0.3, FAULTS, seed=7)
    for step in range(6):
        client.upsert_comment(1, MARKER, f"pass {step}")
        client.ensure_pull("imm/shop", "main", "imm: shop", f"report {step}")
        client.report_check(SHA, "imm: shop", conclusion=None, title="running", summary=str(step))
    fake.faults.clear()
    repo = fake.repo(REPO)
    assert [c["body"] for c in repo.comments.values()] == [f"{MARKER}\npass 5"]
    assert [(p["title"], p["body"]) for p in repo.pulls.values()] == [("imm: shop", "report 5")]
    assert len(repo.check_runs) == 1
    assert len(fake.faults.injected) > 5  # the faults really happened


def test_a_budget_that_runs_out_is_a_clear_error_not_an_endless_loop(fake: FakeGitHub) -> None:
    client = make_client(fake, RetryBudget(attempts=3, seconds=10, max_wait=0.01))
    fake.faults.randomly(1.0, (Fault.SERVER_ERROR,), seed=1)
    with pytest.raises(GitHubUnavailableError, match="GitHub kept failing while trying to update"):
        client.upsert_comment(1, MARKER, "x")
    assert len(fake.requests) <= 3 * 5  # our attempts x the transport's own retries


def test_check_runs_fall_back_to_a_commit_status_when_refused(fake: FakeGitHub) -> None:
    fake.repo(REPO).check_runs_refused = True
    written = make_client(fake).report_check(
        SHA, "imm: shop", conclusion="failure", title="parked", summary=""
    )
    assert written == "status"
    assert [(s["state"], s["context"]) for s in fake.repo(REPO).statuses] == [
        ("failure", "imm: shop")
    ]


def test_a_check_run_is_reused_for_the_same_head_and_name(fake: FakeGitHub) -> None:
    client = make_client(fake)
    client.report_check(SHA, "imm: shop", conclusion=None, title="running", summary="")
    client.report_check(SHA, "imm: shop", conclusion="success", title="completed", summary="done")
    (run,) = fake.repo(REPO).check_runs.values()
    assert (run["status"], run["conclusion"], run["output"]["title"]) == (
        "completed",
        "success",
        "completed",
    )


def test_permissions_are_read_through_the_api(fake: FakeGitHub) -> None:
    client = make_client(fake)
    assert client.permission("writer") == "write"
    assert allows(client.permission("writer"), "write")
    assert not allows(client.permission("triager"), "write")
    assert not allows(client.permission("stranger"), "write")


def test_dispatch_sends_the_inputs_as_strings(fake: FakeGitHub) -> None:
    make_client(fake).dispatch("imm-batch.yml", "main", {"initiative": "shop"})
    assert fake.repo(REPO).dispatches[0]["inputs"] == {"initiative": "shop"}


def test_a_dispatch_github_refuses_is_an_input_error_with_githubs_words_and_not_retried(
    fake: FakeGitHub,
) -> None:
    fake.add_workflow(REPO, "declared.yml", "declared", inputs={"initiative": True})
    with pytest.raises(DispatchRefusedError, match=r'Unexpected inputs provided: \["pass"\]'):
        make_client(fake).dispatch("declared.yml", "main", {"initiative": "shop", "pass": "x"})
    dispatches = [r for r in fake.requests if r.path.endswith("/dispatches")]
    assert [r.status for r in dispatches] == [422]
    assert DispatchRefusedError.exit_code == 2


def test_a_token_github_refuses_is_one_clear_error_for_rest_and_graphql_alike(
    fake: FakeGitHub,
) -> None:
    budget = RetryBudget(attempts=12, seconds=60, max_wait=0.05)
    client = GitHubClient(build_github("wrong-token", fake.url, timeout=5), REPO, budget)
    with pytest.raises(GitHubAuthError, match=r"401 Bad credentials.*check the token"):
        client.permission("writer")
    with pytest.raises(GitHubAuthError, match=r"GraphQL query .*401 Bad credentials"):
        client.graphql("query Viewer { viewer { login } }", {})
    assert [r.status for r in fake.requests] == [401, 401]  # neither was retried


@pytest.mark.parametrize("imm_login", ["github-actions[bot]", "imm-person"])
def test_a_marker_planted_in_someone_elses_comment_is_not_taken_for_the_status_comment(
    imm_login: str,
) -> None:
    tokens = {"imm-token": imm_login, "mallory-token": "mallory"}
    with FakeGitHub(tokens=tokens) as fake:
        fake.add_repo(REPO, {"acme": "admin", "mallory": "read"})
        issue = fake.state.new_issue(fake.repo(REPO), "Initiative shop", "body", "acme")
        planted = f"nice issue {MARKER}"
        mallory = build_github("mallory-token", fake.url, timeout=5).get_repo(REPO)
        mallory.get_issue(issue["number"]).create_comment(planted)
        budget = RetryBudget(attempts=3, seconds=30, max_wait=0.05)
        client = GitHubClient(build_github("imm-token", fake.url, timeout=5), REPO, budget)
        client.upsert_comment(issue["number"], MARKER, "running")
        client.upsert_comment(issue["number"], MARKER, "completed")
        comments = list(fake.repo(REPO).comments.values())
        assert [(c["user"]["login"], c["body"]) for c in comments] == [
            ("mallory", planted),
            (imm_login, f"{MARKER}\ncompleted"),
        ]
