"""The fake's GraphQL endpoint: the subset of GitHub's schema the tracker carrier queries
(search, an issue's sub-issues with their bodies and blocked-by dependencies), with GitHub's
connection shapes and cursors."""

from __future__ import annotations

import base64
from typing import Any

from tests.fake_github.state import FakeRepo, FakeState, Json

SDL = """
type Query {
  search(query: String!, type: SearchType!, first: Int, after: String): SearchResultItemConnection!
  repository(owner: String!, name: String!): Repository
  rateLimit: RateLimit
}
enum SearchType { ISSUE REPOSITORY USER DISCUSSION }
type RateLimit { cost: Int! remaining: Int! limit: Int! }
type PageInfo { hasNextPage: Boolean! endCursor: String }
type SearchResultItemConnection { issueCount: Int! pageInfo: PageInfo! nodes: [Issue] }
type Repository { id: ID! databaseId: Int nameWithOwner: String! issue(number: Int!): Issue }
type IssueConnection { totalCount: Int! pageInfo: PageInfo! nodes: [Issue] }
enum IssueState { OPEN CLOSED }
type Issue {
  id: ID!
  databaseId: Int
  number: Int!
  title: String!
  body: String!
  state: IssueState!
  url: String!
  subIssues(first: Int, after: String): IssueConnection!
  blockedBy(first: Int, after: String): IssueConnection!
}
"""


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
        from graphql import build_schema

        self.state = state
        self.schema = build_schema(SDL)
        query = self.schema.query_type
        assert query is not None
        query.fields["search"].resolve = self._search
        query.fields["repository"].resolve = self._repository
        repository = self.schema.get_type("Repository")
        repository.fields["issue"].resolve = self._issue  # type: ignore[union-attr]
        issue = self.schema.get_type("Issue")
        issue.fields["subIssues"].resolve = self._sub_issues  # type: ignore[union-attr]
        issue.fields["blockedBy"].resolve = self._blocked_by  # type: ignore[union-attr]

    def execute(self, query: str, variables: dict[str, Any] | None) -> Json:
        from graphql import graphql_sync

        result = graphql_sync(self.schema, query, root_value={}, variable_values=variables)
        payload: Json = {"data": result.data}
        if result.errors:
            payload["errors"] = [
                {"message": error.message, "path": error.path} for error in result.errors
            ]
        return payload

    # -- resolvers -----------------------------------------------------------------------------
    def _node(self, repo: FakeRepo, issue: Json) -> Json:
        return {**issue, "_repo": repo, "id": issue["node_id"], "databaseId": issue["id"],
                "body": issue["body"] or "", "state": issue["state"].upper(), "url": issue["html_url"]}  # fmt: skip

    def _search(self, _root: Any, _info: Any, query: str, type: str, first: int | None = None,
                after: str | None = None) -> Json:  # fmt: skip
        terms = _search_terms(query)
        repos = [r for r in self.state.repos.values() if terms["repo"] in ("", r.full_name)]
        found = [
            self._node(repo, issue)
            for repo in repos
            for issue in sorted(repo.issues.values(), key=lambda i: i["number"])
            if all(phrase in (issue["body"] or "") for phrase in terms["phrases"])
        ]
        return _connection(found, first, after)

    def _repository(self, _root: Any, _info: Any, owner: str, name: str) -> Json | None:
        repo = self.state.repos.get(f"{owner}/{name}")
        if repo is None:
            return None
        return {
            "_repo": repo,
            "id": repo.node_id,
            "databaseId": repo.id,
            "nameWithOwner": repo.full_name,
        }

    def _issue(self, parent: Json, _info: Any, number: int) -> Json | None:
        repo: FakeRepo = parent["_repo"]
        issue = repo.issues.get(number)
        return None if issue is None else self._node(repo, issue)

    def _sub_issues(
        self, parent: Json, _info: Any, first: int | None = None, after: str | None = None
    ) -> Json:
        repo: FakeRepo = parent["_repo"]
        children = [
            self._node(repo, repo.issues[n]) for n in repo.sub_issues.get(parent["number"], [])
        ]
        return _connection(children, first, after)

    def _blocked_by(
        self, parent: Json, _info: Any, first: int | None = None, after: str | None = None
    ) -> Json:
        repo: FakeRepo = parent["_repo"]
        blockers = [
            self._node(repo, repo.issues[n]) for n in repo.blocked_by.get(parent["number"], [])
        ]
        return _connection(blockers, first, after)


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
