"""Every GraphQL document the product sends holds against GitHub's published schema (vendored,
plus the commented overlay), and a refused one is a clear failure, as on GitHub."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.errors import EXIT_INVALID_INPUT
from imm_action.github.client import GitHubClient
from imm_action.github.transport import (
    GitHubQueryError,
    GitHubUnavailableError,
    RetryBudget,
    build_github,
)
from tests.fake_github import FakeGitHub
from tests.fake_github.faults import Fault
from tests.fake_github.github_schema import document_errors

SRC = Path(__file__).resolve().parents[2] / "src"
REPO = "acme/widgets"

# FIND_QUERY as it was before issue 10: issue fields selected directly on the union.
OLD_FIND_QUERY = """
query($search: String!, $after: String) {
  search(query: $search, type: ISSUE, first: 5) {
    nodes { number body state
      subIssues(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { number body state blockedBy(first: 100) { nodes { number } } }
      }
    }
  }
}"""


def documents_in_src() -> list[tuple[str, str]]:
    """(where, text) of every string literal in src/ that is a GraphQL operation."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.strip()
                if text.startswith(("query ", "query(", "mutation ", "mutation(")):
                    found.append((f"{path.relative_to(SRC)}:{node.lineno}", node.value))
    return found


def test_the_product_sends_graphql_documents() -> None:
    assert len(documents_in_src()) >= 4  # find, list, read, blockers


@pytest.mark.parametrize(("where", "document"), documents_in_src())
def test_every_graphql_document_in_src_is_valid_against_githubs_schema(
    where: str, document: str
) -> None:
    assert document_errors(document) == [], where


def test_the_old_find_query_is_refused_for_selecting_on_a_union() -> None:
    messages = [error["message"] for error in document_errors(OLD_FIND_QUERY)]
    assert any("on type 'SearchResultItem'" in message for message in messages), messages


def test_a_connection_without_a_page_size_is_refused_as_github_does() -> None:
    document = 'query { repository(owner: "a", name: "b") { issues { totalCount } } }'
    messages = [error["message"] for error in document_errors(document)]
    assert messages == [
        "You must provide a `first` or `last` value to properly paginate the `issues` connection."
    ]


def test_fields_github_serves_beyond_the_package_come_only_from_the_overlay() -> None:
    document = (
        'query { repository(owner: "a", name: "b") { issue(number: 1) { '
        "blockedBy(first: 1) { nodes { number } } blocking(first: 1) { nodes { number } } "
        "dependsOnEverything } } }"
    )
    messages = [error["message"] for error in document_errors(document)]
    assert messages == ["Cannot query field 'dependsOnEverything' on type 'Issue'."]


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO)
        yield github


def _client(fake: FakeGitHub, attempts: int = 6) -> GitHubClient:
    budget = RetryBudget(attempts=attempts, max_wait=0.01)
    return GitHubClient(build_github("test-token", fake.url), REPO, budget)


def test_the_fake_answers_an_invalid_document_like_github(fake: FakeGitHub) -> None:
    import requests

    answer = requests.post(
        f"{fake.url}/graphql",
        json={"query": OLD_FIND_QUERY, "variables": {"search": "x"}},
        headers={"Authorization": "token test-token"},
        timeout=10,
    )
    assert answer.status_code == 200
    payload = answer.json()
    assert "data" not in payload
    assert payload["errors"][0]["locations"]


def test_an_invalid_query_fails_clearly_naming_the_query_and_githubs_message(
    fake: FakeGitHub,
) -> None:
    with pytest.raises(GitHubQueryError) as caught:
        _client(fake).graphql(OLD_FIND_QUERY.replace("query(", "query FindInitiative("), {})
    assert caught.value.exit_code == EXIT_INVALID_INPUT
    assert str(caught.value).startswith("GitHub refused the GraphQL query FindInitiative: ")
    assert "SearchResultItem" in str(caught.value)
    assert len(fake.requests) == 1  # not retried: the request is at fault


def test_a_graphql_request_refused_with_http_400_fails_clearly(fake: FakeGitHub) -> None:
    fake.faults.queue(Fault.BAD_REQUEST)
    with pytest.raises(GitHubQueryError) as caught:
        _client(fake).graphql("query Who { viewer { login } }", {})
    assert str(caught.value) == "GitHub refused the GraphQL query Who: Problems parsing JSON"
    assert caught.value.exit_code == EXIT_INVALID_INPUT


def test_a_passing_graphql_failure_is_retried(fake: FakeGitHub) -> None:
    fake.faults.queue(Fault.GRAPHQL_TIMEOUT)
    data = _client(fake).graphql(
        'query Who { repository(owner: "acme", name: "widgets") { nameWithOwner } }', {}
    )
    assert data == {"repository": {"nameWithOwner": REPO}}
    assert len(fake.requests) == 2


def test_a_graphql_failure_that_keeps_passing_runs_out_of_the_budget(fake: FakeGitHub) -> None:
    fake.faults.queue(*[Fault.GRAPHQL_TIMEOUT] * 3)
    with pytest.raises(GitHubUnavailableError, match="run the GraphQL query Who"):
        _client(fake, attempts=3).graphql(
            'query Who { repository(owner: "acme", name: "widgets") { nameWithOwner } }', {}
        )


def test_an_unknown_issue_number_is_githubs_not_found_message(fake: FakeGitHub) -> None:
    from imm_action.carriers.github import read_github_initiative

    with pytest.raises(GitHubQueryError, match="ReadInitiative: Could not resolve to an Issue"):
        read_github_initiative(_client(fake), REPO, str(fake.repo(REPO).id), "x", 999)
