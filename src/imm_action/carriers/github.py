"""The GitHub issue carrier (SPEC §4.4): the immune-brain tracker protocol — an Initiative issue
carrying hidden markers, its Tasks as native sub-issues, dependencies as native blocked-by —
read with one GraphQL query per 100 sub-issues; or, for an issue written by hand, the local
markdown Slice syntax in the issue body. Errors name the issue number.

Finding the Initiative issue, in GitHub's terms: by number when it is known; else a search
restricted to the repository (search is eventually consistent: a new issue is missing for a
while); else listing the repository's issues newest first, stopping at the first match."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from imm_action.carriers.local import parse_local_initiative
from imm_action.carriers.observed import (
    LocatedInitiative,
    Location,
    ObservedDependency,
    ObservedTask,
    normalise,
)
from imm_action.errors import InputError, Problem
from imm_action.model.initiative import GithubCarrier

TRACKER = "<!-- immune-brain-tracker:v1 -->"
_MARKER = re.compile(r"<!--\s*immune-brain:([a-z-]+)=([^\s>]*)\s*-->")
_REFERENCE = re.compile(r"#([1-9][0-9]{0,9})")
PAGE = 100  # GitHub's largest page on any connection

# Every document below is validated against GitHub's published schema in the tests.
FIND_QUERY = """
query FindInitiative($search: String!) {
  search(query: $search, type: ISSUE, first: 10) {
    nodes { ... on Issue { number body } }
  }
}"""
LIST_QUERY = """
query ListIssues($owner: String!, $name: String!, $after: String) {
  repository(owner: $owner, name: $name) {
    issues(first: 100, after: $after, orderBy: {field: CREATED_AT, direction: DESC}) {
      pageInfo { hasNextPage endCursor }
      nodes { number body }
    }
  }
}"""
READ_QUERY = """
query ReadInitiative($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      number
      body
      subIssues(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          number
          body
          blockedBy(first: 100) { pageInfo { hasNextPage endCursor } nodes { number } }
        }
      }
    }
  }
}"""
BLOCKERS_QUERY = """
query ReadBlockers($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      blockedBy(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { number }
      }
    }
  }
}"""


class GraphQLReader(Protocol):
    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]: ...


def issue_reference(text: str) -> int | None:
    """`#123` -> 123: how an `initiative` input names the tracker issue instead of a slug."""
    found = _REFERENCE.fullmatch(text.strip())
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class GitHubSource:
    """Where GitHub-carried initiatives of this repository are read from. A command reads an
    initiative once: later asks (e.g. which issue carries each task) reuse that read."""

    reader: GraphQLReader
    repository: str  # owner/name
    # GitHub's numeric id, as the tracker's repo-id marker holds it; "" with `id_lookup`: asked
    # of the API when first needed (outside Actions nothing sets GITHUB_REPOSITORY_ID)
    known_id: str
    id_lookup: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    _read: dict[str, LocatedInitiative] = field(default_factory=dict, compare=False, repr=False)
    _id: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def repository_id(self) -> str:
        if self.known_id or self.id_lookup is None:
            return self.known_id
        if not self._id:
            self._id.append(self.id_lookup())
        return self._id[0]

    def read(self, slug: str, issue: int | None = None) -> LocatedInitiative:
        """The initiative `slug`; `issue`, when known (the event's issue, a `#123` input, the
        batch state), is read directly instead of being looked for."""
        if slug not in self._read:
            self._read[slug] = read_github_initiative(
                self.reader, self.repository, self.repository_id, slug, issue
            )
        return self._read[slug]

    def slug_of(self, reference: str) -> str:
        """The slug an `initiative` input names: a slug as it is; for `#123`, the slug the
        tracker issue carries (that read is kept: reading the initiative costs nothing more)."""
        issue = issue_reference(reference)
        if issue is None:
            return reference
        found = _read_issue(self.reader, self.repository, issue)
        slug = markers(found.body).get("initiative-id") or ""
        if not _is_initiative(found.body, self.repository_id, slug):
            raise InputError(
                [Problem(f"issue #{issue}", None, "is not an Initiative issue of this repository")]
            )
        self._read.setdefault(slug, _located(found, self.repository_id, slug))
        return slug

    def task_issues(self, slug: str) -> dict[str, int]:
        """Task id -> the issue that carries it."""
        return {
            task: int(location.path.removeprefix("issue #"))
            for task, location in self.read(slug).locations.items()
            if location.path.startswith("issue #")
        }


def markers(body: str | None) -> dict[str, str]:
    return dict(_MARKER.findall(body or ""))


@dataclass(frozen=True)
class TrackerIssue:
    number: int
    body: str
    blocked_by: tuple[int, ...]


@dataclass(frozen=True)
class _ReadIssue:
    number: int
    body: str
    children: list[TrackerIssue]


def read_github_initiative(
    reader: GraphQLReader, repository: str, repo_id: str, slug: str, issue: int | None = None
) -> LocatedInitiative:
    """Find the Initiative issue of `slug` and read its Tasks: by number when it is known (one
    query per 100 sub-issues), else found by search (one more query), else, when the search
    index has not caught up, by listing the repository's issues newest first (one more query per
    100 issues looked at)."""
    number = issue if issue is not None else find_initiative(reader, repository, repo_id, slug)
    return _located(_read_issue(reader, repository, number), repo_id, slug)


def _located(found: _ReadIssue, repo_id: str, slug: str) -> LocatedInitiative:
    number = found.number
    if not _is_initiative(found.body, repo_id, slug):
        raise InputError(
            [
                Problem(
                    f"issue #{number}",
                    None,
                    f"does not carry the Initiative markers of {slug!r} for this repository",
                )
            ]
        )
    origin = Location(f"issue #{number}", None)
    carrier = GithubCarrier(issue_number=number)
    if not found.children:
        # An issue written by hand: the Slice syntax in its body.
        located = parse_local_initiative(found.body, slug, origin.path)
        return replace(located, initiative=replace(located.initiative, carrier=carrier))
    return normalise(slug, carrier, _observe(found.children, slug), origin)


def find_initiative(reader: GraphQLReader, repository: str, repo_id: str, slug: str) -> int:
    """The number of the Initiative issue of `slug`: by search, else by listing."""
    search = (
        f'repo:{repository} is:issue in:body "immune-brain:kind=initiative" '
        f'"immune-brain:initiative-id={slug}"'
    )
    nodes = reader.graphql(FIND_QUERY, {"search": search})["search"]["nodes"]
    candidates = sorted(
        node["number"]
        for node in nodes
        if "number" in node and _is_initiative(node.get("body"), repo_id, slug)
    )
    if len(candidates) > 1:
        numbers = ", ".join(f"#{number}" for number in candidates)
        raise InputError(
            [
                Problem(
                    f"GitHub {repository}",
                    None,
                    f"initiative {slug!r} is carried by several issues: {numbers}",
                )
            ]
        )
    if candidates:
        return int(candidates[0])
    listed = _list_for_initiative(reader, repository, repo_id, slug)
    if listed is None:
        raise InputError(
            [
                Problem(
                    f"GitHub {repository}",
                    None,
                    f"no Initiative issue carries the markers of {slug!r}",
                )
            ]
        )
    return listed


def _list_for_initiative(
    reader: GraphQLReader, repository: str, repo_id: str, slug: str
) -> int | None:
    """The repository's issues (every state), newest first, page by page, up to the first one
    that carries the markers: search may not have indexed a new tracker issue yet."""
    owner, name = repository.split("/")
    after: str | None = None
    while True:
        variables = {"owner": owner, "name": name, "after": after}
        connection = reader.graphql(LIST_QUERY, variables)["repository"]["issues"]
        for node in connection["nodes"]:
            if _is_initiative(node.get("body"), repo_id, slug):
                return int(node["number"])
        if not connection["pageInfo"]["hasNextPage"]:
            return None
        after = connection["pageInfo"]["endCursor"]


def _read_issue(reader: GraphQLReader, repository: str, number: int) -> _ReadIssue:
    """An issue's body and every sub-issue (one query per 100), each with all its blockers."""
    owner, name = repository.split("/")
    variables: dict[str, Any] = {"owner": owner, "name": name, "number": number, "after": None}
    issue = reader.graphql(READ_QUERY, variables)["repository"]["issue"]
    body = issue.get("body") or ""
    children: list[TrackerIssue] = []
    while True:
        connection = issue["subIssues"]
        children += [_tracker_issue(reader, owner, name, node) for node in connection["nodes"]]
        if not connection["pageInfo"]["hasNextPage"]:
            return _ReadIssue(number, body, children)
        variables["after"] = connection["pageInfo"]["endCursor"]
        issue = reader.graphql(READ_QUERY, variables)["repository"]["issue"]


def _tracker_issue(
    reader: GraphQLReader, owner: str, name: str, node: Mapping[str, Any]
) -> TrackerIssue:
    connection = node["blockedBy"]
    blockers = [blocker["number"] for blocker in connection["nodes"]]
    while connection["pageInfo"]["hasNextPage"]:  # more than 100 blockers: page through them
        variables = {"owner": owner, "name": name, "number": node["number"],
                     "after": connection["pageInfo"]["endCursor"]}  # fmt: skip
        connection = reader.graphql(BLOCKERS_QUERY, variables)["repository"]["issue"]["blockedBy"]
        blockers += [blocker["number"] for blocker in connection["nodes"]]
    return TrackerIssue(node["number"], node.get("body") or "", tuple(blockers))


def _is_initiative(body: str | None, repo_id: str, slug: str) -> bool:
    found = markers(body)
    return (
        TRACKER in (body or "")
        and found.get("kind") == "initiative"
        and found.get("initiative-id") == slug
        and found.get("repo-id") == repo_id
    )


def _observe(children: list[TrackerIssue], slug: str) -> list[ObservedTask]:
    problems: list[Problem] = []
    task_of: dict[int, str] = {}
    for child in children:
        found = markers(child.body)
        if found.get("kind") == "task" and found.get("task-id"):
            task_of[child.number] = found["task-id"]
    observed = []
    for child in children:
        where = Location(f"issue #{child.number}", None)
        found = markers(child.body)
        if found.get("kind") != "task":
            continue  # sub-issues that are not Tasks (notes, questions) are not batched
        missing = [key for key in ("task-id", "slice-id", "initiative-id") if not found.get(key)]
        if missing:
            problems.append(where.problem(f"Task issue lacks the {', '.join(missing)} marker"))
            continue
        if found["initiative-id"] != slug:
            problems.append(
                where.problem(
                    f"Task issue belongs to initiative {found['initiative-id']!r}, not {slug!r}"
                )
            )
            continue
        dependencies = []
        for blocker in child.blocked_by:
            if blocker not in task_of:
                problems.append(
                    where.problem(f"blocked by #{blocker}, which is not a Task of this initiative")
                )
                continue
            dependencies.append(ObservedDependency(task_of[blocker], where))
        observed.append(
            ObservedTask(found["task-id"], found["slice-id"], tuple(dependencies), where)
        )
    if problems:
        raise InputError(problems)
    return observed
