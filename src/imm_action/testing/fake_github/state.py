"""The fake's data: repositories and what lives in them, stored in GitHub's own shapes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FakeRepo:
    owner: str
    name: str
    id: int
    node_id: str
    default_branch: str = "main"
    issues: dict[int, Json] = field(default_factory=dict)  # number -> issue (PRs included)
    comments: dict[int, Json] = field(default_factory=dict)
    reactions: dict[int, list[Json]] = field(default_factory=dict)  # comment id -> reactions
    check_runs: dict[int, Json] = field(default_factory=dict)
    statuses: list[Json] = field(default_factory=list)
    pulls: dict[int, Json] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> permission
    workflows: dict[str, Json] = field(default_factory=dict)  # file name -> workflow
    dispatches: list[Json] = field(default_factory=list)
    runs: dict[int, Json] = field(default_factory=dict)
    sub_issues: dict[int, list[int]] = field(default_factory=dict)  # parent -> children
    blocked_by: dict[int, list[int]] = field(default_factory=dict)  # issue -> blockers
    check_runs_refused: bool = False  # a token without checks:write gets 403 on check runs

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class FakeState:
    def __init__(self, base_url: str = "") -> None:
        self.base_url = base_url
        self.repos: dict[str, FakeRepo] = {}
        self._ids = itertools.count(1000)

    def next_id(self) -> int:
        return next(self._ids)

    def api(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def user(self, login: str) -> Json:
        user_id = sum(map(ord, login)) + 100
        return {
            "login": login,
            "id": user_id,
            "node_id": f"U_{user_id}",
            "avatar_url": f"https://avatars.example/u/{user_id}",
            "gravatar_id": "",
            "url": self.api(f"/users/{login}"),
            "html_url": f"https://github.example/{login}",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
        }

    def add_repo(self, owner: str, name: str) -> FakeRepo:
        repo_id = self.next_id()
        repo = FakeRepo(owner=owner, name=name, id=repo_id, node_id=f"R_{repo_id}")
        self.repos[repo.full_name] = repo
        return repo

    def repo_json(self, repo: FakeRepo) -> Json:
        base = f"/repos/{repo.full_name}"
        return {
            "id": repo.id,
            "node_id": repo.node_id,
            "name": repo.name,
            "full_name": repo.full_name,
            "private": False,
            "owner": self.user(repo.owner),
            "html_url": f"https://github.example/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": self.api(base),
            "default_branch": repo.default_branch,
            "issues_url": self.api(base + "/issues{/number}"),
            "pulls_url": self.api(base + "/pulls{/number}"),
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "pushed_at": "2026-01-01T00:00:00Z",
            "permissions": {
                "admin": False,
                "maintain": False,
                "push": True,
                "triage": True,
                "pull": True,
            },
        }

    def new_issue(self, repo: FakeRepo, title: str, body: str | None, author: str) -> Json:
        number = max([0, *repo.issues, *repo.pulls]) + 1
        issue_id = self.next_id()
        base = f"/repos/{repo.full_name}/issues/{number}"
        issue: Json = {
            "id": issue_id,
            "node_id": f"I_{issue_id}",
            "url": self.api(base),
            "repository_url": self.api(f"/repos/{repo.full_name}"),
            "comments_url": self.api(base + "/comments"),
            "events_url": self.api(base + "/events"),
            "labels_url": self.api(base + "/labels{/name}"),
            "html_url": f"https://github.example/{repo.full_name}/issues/{number}",
            "number": number,
            "state": "open",
            "state_reason": None,
            "title": title,
            "body": body,
            "user": self.user(author),
            "labels": [],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": False,
            "comments": 0,
            "created_at": now_iso(),
            "updated_at": now_iso(),
            "closed_at": None,
            "author_association": "OWNER" if author == repo.owner else "CONTRIBUTOR",
        }
        repo.issues[number] = issue
        return issue

    def new_comment(self, repo: FakeRepo, issue: Json, body: str, author: str) -> Json:
        comment_id = self.next_id()
        comment: Json = {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": self.api(f"/repos/{repo.full_name}/issues/comments/{comment_id}"),
            "html_url": f"{issue['html_url']}#issuecomment-{comment_id}",
            "issue_url": issue["url"],
            "body": body,
            "user": self.user(author),
            "created_at": now_iso(),
            "updated_at": now_iso(),
            "author_association": "OWNER" if author == repo.owner else "CONTRIBUTOR",
        }
        repo.comments[comment_id] = comment
        issue["comments"] += 1
        return comment
