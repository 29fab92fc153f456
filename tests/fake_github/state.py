"""The fake's data: repositories and what lives in them, stored in GitHub's own shapes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Json = dict[str, Any]


_REPO_URLS = {
    "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}", "blobs": "git/blobs{/sha}",
    "branches": "branches{/branch}", "collaborators": "collaborators{/collaborator}",
    "comments": "comments{/number}", "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
    "contents": "contents/{+path}", "contributors": "contributors", "deployments": "deployments",
    "downloads": "downloads", "events": "events", "forks": "forks", "git_commits": "git/commits{/sha}",
    "git_refs": "git/refs{/sha}", "git_tags": "git/tags{/sha}", "hooks": "hooks",
    "issue_comment": "issues/comments{/number}", "issue_events": "issues/events{/number}",
    "issues": "issues{/number}", "keys": "keys{/key_id}", "labels": "labels{/name}",
    "languages": "languages", "merges": "merges", "milestones": "milestones{/number}",
    "notifications": "notifications{?since,all,participating}", "pulls": "pulls{/number}",
    "releases": "releases{/id}", "stargazers": "stargazers", "statuses": "statuses/{sha}",
    "subscribers": "subscribers", "subscription": "subscription", "tags": "tags",
    "teams": "teams", "trees": "git/trees{/sha}",
}  # fmt: skip


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
    annotations: dict[int, list[Json]] = field(default_factory=dict)  # check run id -> appended
    statuses: list[Json] = field(default_factory=list)
    pulls: dict[int, Json] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> permission
    workflows: dict[str, Json] = field(default_factory=dict)  # file name -> workflow
    dispatches: list[Json] = field(default_factory=list)
    dispatch_inputs: dict[str, dict[str, bool]] = field(default_factory=dict)  # file -> inputs
    runs: dict[int, Json] = field(default_factory=dict)
    jobs: dict[int, Json] = field(default_factory=dict)  # job id -> job (its run in run_id)
    # artifact id -> (run id, name): the files are a run's folder under the fake's
    # `artifacts_root`, where the upload-artifact stand-in keeps them
    artifacts: dict[int, tuple[int, str]] = field(default_factory=dict)
    sub_issues: dict[int, list[int]] = field(default_factory=dict)  # parent -> children
    blocked_by: dict[int, list[int]] = field(default_factory=dict)  # issue -> blockers
    check_runs_refused: bool = False  # a token without checks:write gets 403 on check runs
    dispatches_refused: int = 0  # so many dispatches get 403 (a job without actions: write)
    pulls_refused: bool = False  # "Allow GitHub Actions to create pull requests" is off
    # Issues GitHub's search index has not caught up with yet (search is eventually consistent).
    unindexed: set[int] = field(default_factory=set)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class FakeState:
    def __init__(self, base_url: str = "") -> None:
        self.base_url = base_url
        self.repos: dict[str, FakeRepo] = {}
        # where workflow runs' artifacts are kept: <root>/<run id>/<artifact name>/<files>
        self.artifacts_root: Path | None = None
        self._ids = itertools.count(1000)

    def next_id(self) -> int:
        return next(self._ids)

    def api(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def user(self, login: str) -> Json:
        user_id = sum(map(ord, login)) + 100
        api = self.api(f"/users/{login}")
        return {
            "login": login,
            "id": user_id,
            "node_id": f"U_{user_id}",
            "avatar_url": f"https://avatars.example/u/{user_id}",
            "gravatar_id": "",
            "url": api,
            "html_url": f"https://github.example/{login}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
        }

    def add_repo(self, owner: str, name: str) -> FakeRepo:
        repo_id = self.next_id()
        repo = FakeRepo(owner=owner, name=name, id=repo_id, node_id=f"R_{repo_id}")
        self.repos[repo.full_name] = repo
        return repo

    def repo_json(self, repo: FakeRepo) -> Json:
        """A full repository as `GET /repos/{owner}/{repo}` returns it."""
        base = self.api(f"/repos/{repo.full_name}")
        urls = {f"{name}_url": f"{base}/{path}" for name, path in _REPO_URLS.items()}
        return {
            **urls,
            "id": repo.id,
            "node_id": repo.node_id,
            "name": repo.name,
            "full_name": repo.full_name,
            "private": False,
            "owner": self.user(repo.owner),
            "html_url": f"https://github.example/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": base,
            "clone_url": f"https://github.example/{repo.full_name}.git",
            "git_url": f"git://github.example/{repo.full_name}.git",
            "ssh_url": f"git@github.example:{repo.full_name}.git",
            "svn_url": f"https://github.example/{repo.full_name}",
            "mirror_url": None,
            "homepage": None,
            "language": "Python",
            "default_branch": repo.default_branch,
            "forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0,
            "watchers_count": 0, "open_issues": 0, "open_issues_count": 0, "size": 1,
            "network_count": 0, "subscribers_count": 0,
            "has_issues": True, "has_downloads": False, "has_projects": False, "has_wiki": False, "has_pages": False,
            "has_discussions": False, "archived": False, "disabled": False, "license": None,
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "pushed_at": "2026-01-01T00:00:00Z",
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
        }  # fmt: skip

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
