"""The GitHub issue carrier (SPEC §4.4): the immune-brain tracker protocol — an Initiative issue
found by its hidden markers, its Tasks as native sub-issues, dependencies as native blocked-by —
read with one GraphQL query per 100 sub-issues; or, for an issue written by hand, the local
markdown Slice syntax in the issue body. Errors name the issue number."""

from __future__ import annotations

import re
from collections.abc import Mapping
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

_ISSUE_FIELDS = "number body state"
_SUB_ISSUES = f"""
subIssues(first: 100, after: $after) {{
  pageInfo {{ hasNextPage endCursor }}
  nodes {{ {_ISSUE_FIELDS} blockedBy(first: 100) {{ nodes {{ number }} }} }}
}}"""
FIND_QUERY = f"""
query($search: String!, $after: String) {{
  search(query: $search, type: ISSUE, first: 5) {{
    nodes {{ {_ISSUE_FIELDS} {_SUB_ISSUES} }}
  }}
}}"""
PAGE_QUERY = f"""
query($owner: String!, $name: String!, $number: Int!, $after: String) {{
  repository(owner: $owner, name: $name) {{ issue(number: $number) {{ number {_SUB_ISSUES} }} }}
}}"""


class GraphQLReader(Protocol):
    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class GitHubSource:
    """Where GitHub-carried initiatives of this repository are read from. A command reads an
    initiative once: later asks (e.g. which issue carries each task) reuse that read."""

    reader: GraphQLReader
    repository: str  # owner/name
    repository_id: str  # GitHub's numeric id, as the tracker's repo-id marker holds it
    _read: dict[str, LocatedInitiative] = field(default_factory=dict, compare=False, repr=False)

    def read(self, slug: str) -> LocatedInitiative:
        if slug not in self._read:
            self._read[slug] = read_github_initiative(
                self.reader, self.repository, self.repository_id, slug
            )
        return self._read[slug]

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


def read_github_initiative(
    reader: GraphQLReader, repository: str, repo_id: str, slug: str
) -> LocatedInitiative:
    """Find the Initiative issue of `slug` and read its Tasks (one query per 100 sub-issues)."""
    search = (
        f'repo:{repository} is:issue in:body "immune-brain:kind=initiative" '
        f'"immune-brain:initiative-id={slug}"'
    )
    found = reader.graphql(FIND_QUERY, {"search": search, "after": None})["search"]["nodes"]
    candidates = [node for node in found if _is_initiative(node, repo_id, slug)]
    if not candidates:
        raise InputError(
            [
                Problem(
                    f"GitHub {repository}",
                    None,
                    f"no Initiative issue carries the markers of {slug!r}",
                )
            ]
        )
    if len(candidates) > 1:
        numbers = ", ".join(f"#{node['number']}" for node in candidates)
        raise InputError(
            [
                Problem(
                    f"GitHub {repository}",
                    None,
                    f"initiative {slug!r} is carried by several issues: {numbers}",
                )
            ]
        )
    initiative = candidates[0]
    children = _all_sub_issues(reader, repository, initiative)
    origin = Location(f"issue #{initiative['number']}", None)
    carrier = GithubCarrier(issue_number=initiative["number"])
    if not children:
        # An issue written by hand: the Slice syntax in its body.
        located = parse_local_initiative(initiative["body"], slug, origin.path)
        return replace(located, initiative=replace(located.initiative, carrier=carrier))
    return normalise(slug, carrier, _observe(children, slug), origin)


def _is_initiative(node: Mapping[str, Any], repo_id: str, slug: str) -> bool:
    found = markers(node.get("body"))
    return (
        TRACKER in (node.get("body") or "")
        and found.get("kind") == "initiative"
        and found.get("initiative-id") == slug
        and found.get("repo-id") == repo_id
    )


def _all_sub_issues(
    reader: GraphQLReader, repository: str, initiative: Mapping[str, Any]
) -> list[TrackerIssue]:
    owner, name = repository.split("/")
    connection = initiative["subIssues"]
    issues = [_tracker_issue(node) for node in connection["nodes"]]
    while connection["pageInfo"]["hasNextPage"]:
        variables = {"owner": owner, "name": name, "number": initiative["number"],
                     "after": connection["pageInfo"]["endCursor"]}  # fmt: skip
        connection = reader.graphql(PAGE_QUERY, variables)["repository"]["issue"]["subIssues"]
        issues += [_tracker_issue(node) for node in connection["nodes"]]
    return issues


def _tracker_issue(node: Mapping[str, Any]) -> TrackerIssue:
    blockers = tuple(blocker["number"] for blocker in node["blockedBy"]["nodes"])
    return TrackerIssue(node["number"], node.get("body") or "", blockers)


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
