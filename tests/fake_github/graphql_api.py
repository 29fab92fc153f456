"""The fake's GraphQL endpoint: GitHub's published schema (plus the overlay), every document
validated against it as GitHub does (HTTP 200, `errors` and no `data` when it is refused), and
resolvers for what the product reads: search, a repository's issues newest first, an issue's
sub-issues and its blocked-by / blocking dependencies, with GitHub's connection shapes and
cursors."""

from __future__ import annotations

import base64
import functools
from typing import Any

from graphql import GraphQLError

from tests.fake_github.github_schema import document_errors, github_schema
from tests.fake_github.state import FakeRepo, FakeState, Json


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:{index}".encode()).decode()


def _offset(after: str | None) -> int:
    if not after:
        return 0
    return int(base64.b64decode(after).decode().split(":")[1]) + 1


def _connection(items: list[Json], first: int | None, after: str | None) -> Json:
    if first is not None and not 1 <= first <= 100:
        raise ValueError("Requesting more than 100 records on the connection is not allowed")
    start = _offset(after)
    page = items[start : start + (first or 100)]
    last = start + len(page) - 1
    return {
        "totalCount": len(items),
        "issueCount": len(items),
        "pageInfo": {
            "hasNextPage": start + len(page) < len(items),
            "endCursor": _cursor(last) if page else None,
        },
        "nodes": page,
    }


class GraphQLApi:
    def __init__(self, state: FakeState) -> None:
        self.state = state
        _install_resolvers()

    def execute(self, query: str, variables: dict[str, Any] | None) -> Json:
        from graphql import graphql_sync

        refused = document_errors(query)
        if refused:
            return {"errors": refused}
        result = graphql_sync(
            github_schema(), query, root_value={}, context_value=self.state,
            variable_values=variables,
        )  # fmt: skip
        payload: Json = {"data": result.data}
        if result.errors:
            payload["errors"] = [_github_error(error) for error in result.errors]
        return payload


def _github_error(error: Any) -> Json:
    formatted: Json = dict(error.formatted)
    kind = (error.extensions or {}).get("type")
    if kind:
        formatted["type"] = kind
    return formatted


@functools.cache
def _install_resolvers() -> None:
    """Resolvers on the shared schema; each reads the fake's state from the request context."""
    schema = github_schema()
    query = schema.query_type
    assert query is not None
    query.fields["search"].resolve = _search
    query.fields["repository"].resolve = _repository
    union = schema.get_type("SearchResultItem")
    union.resolve_type = lambda value, *_: value["__typename"]  # type: ignore[union-attr]
    repository = schema.get_type("Repository")
    repository.fields["issue"].resolve = _issue  # type: ignore[union-attr]
    repository.fields["issues"].resolve = _issues  # type: ignore[union-attr]
    issue = schema.get_type("Issue")
    issue.fields["subIssues"].resolve = _sub_issues  # type: ignore[union-attr]
    issue.fields["blockedBy"].resolve = _related("blocked_by")  # type: ignore[union-attr]
    issue.fields["blocking"].resolve = _related("blocking")  # type: ignore[union-attr]


def _not_found(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"type": "NOT_FOUND"})


def _node(repo: FakeRepo, issue: Json) -> Json:
    return {**issue, "__typename": "Issue", "_repo": repo, "id": issue["node_id"],
            "databaseId": issue["id"], "body": issue["body"] or "",
            "state": issue["state"].upper(), "url": issue["html_url"]}  # fmt: skip


def _is_issue(issue: Json) -> bool:
    return "pull_request" not in issue


def _search(_root: Any, info: Any, query: str, type: str, first: int | None = None,
            after: str | None = None, **_: Any) -> Json:  # fmt: skip
    """Issue search: phrases in the body; issues still waiting for the search index (see
    `FakeRepo.unindexed`) are not found, as on GitHub right after they are created."""
    state: FakeState = info.context
    terms = _search_terms(query)
    repos = [r for r in state.repos.values() if terms["repo"] in ("", r.full_name)]
    found = [
        _node(repo, issue)
        for repo in repos
        for issue in sorted(repo.issues.values(), key=lambda i: -i["number"])
        if _is_issue(issue) and issue["number"] not in repo.unindexed
        and all(phrase in (issue["body"] or "") for phrase in terms["phrases"])
    ]  # fmt: skip
    return _connection(found, first, after)


def _repository(_root: Any, info: Any, owner: str, name: str, **_: Any) -> Json:
    state: FakeState = info.context
    repo = state.repos.get(f"{owner}/{name}")
    if repo is None:
        raise _not_found(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
    return {"_repo": repo, "id": repo.node_id, "databaseId": repo.id,
            "nameWithOwner": repo.full_name}  # fmt: skip


def _issue(parent: Json, _info: Any, number: int) -> Json:
    repo: FakeRepo = parent["_repo"]
    issue = repo.issues.get(number)
    if issue is None or not _is_issue(issue):
        raise _not_found(f"Could not resolve to an Issue with the number of {number}.")
    return _node(repo, issue)


def _issues(parent: Json, _info: Any, first: int | None = None, after: str | None = None,
            orderBy: Json | None = None, states: list[str] | None = None, **_: Any) -> Json:  # noqa: N803  # fmt: skip
    repo: FakeRepo = parent["_repo"]
    order = orderBy or {"field": "CREATED_AT", "direction": "ASC"}
    issues = sorted(
        (issue for issue in repo.issues.values() if _is_issue(issue)),
        key=lambda issue: issue["number"], reverse=order["direction"] == "DESC",
    )  # fmt: skip
    wanted = {s.upper() for s in states} if states else {"OPEN", "CLOSED"}
    nodes = [_node(repo, issue) for issue in issues if issue["state"].upper() in wanted]
    return _connection(nodes, first, after)


def _sub_issues(parent: Json, _info: Any, first: int | None = None, after: str | None = None,
                **_: Any) -> Json:  # fmt: skip
    repo: FakeRepo = parent["_repo"]
    children = [_node(repo, repo.issues[n]) for n in repo.sub_issues.get(parent["number"], [])]
    return _connection(children, first, after)


def _related(relation: str) -> Any:
    def resolve(parent: Json, _info: Any, first: int | None = None, after: str | None = None,
                **_: Any) -> Json:  # fmt: skip
        repo: FakeRepo = parent["_repo"]
        if relation == "blocked_by":
            numbers = repo.blocked_by.get(parent["number"], [])
        else:
            numbers = [n for n, blockers in repo.blocked_by.items() if parent["number"] in blockers]
        return _connection([_node(repo, repo.issues[n]) for n in numbers], first, after)

    return resolve


def _search_terms(query: str) -> dict[str, Any]:
    """`repo:o/r is:issue "a phrase" "another"` -> the repository and the quoted phrases."""
    phrases = []
    repo = ""
    rest = query
    while '"' in rest:
        before, _, after = rest.partition('"')
        phrase, _, rest = after.partition('"')
        phrases.append(phrase)
        rest = before + " " + rest
    for word in rest.split():
        if word.startswith("repo:"):
            repo = word[len("repo:") :]
    return {"repo": repo, "phrases": phrases}
