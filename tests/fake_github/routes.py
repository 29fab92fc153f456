"""The REST endpoints the product uses, with GitHub's validation rules and messages."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fake_github.state import FakeRepo, FakeState, Json, now_iso

PERMISSIONS = ("none", "read", "triage", "write", "maintain", "admin")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


@dataclass(frozen=True)
class Redirect:
    """A 302 to `location` (GitHub's answer for an artifact's download)."""

    location: str


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


@dataclass
class Call:
    state: FakeState
    login: str
    params: dict[str, str]
    body: Any
    query: dict[str, list[str]]
    lock: threading.RLock

    @property
    def repo(self) -> FakeRepo:
        repo = self.state.repos.get(f"{self.params['owner']}/{self.params['repo']}")
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo

    def field(self, name: str, resource: str) -> Any:
        if not isinstance(self.body, dict) or self.body.get(name) in (None, ""):
            raise ApiError(422, "Validation Failed",
                           [{"resource": resource, "field": name, "code": "missing_field"}])  # fmt: skip
        return self.body[name]

    def body_text(self, resource: str, required: bool = True) -> str | None:
        """A comment's, an issue's or a pull request's `body`: GitHub refuses one over 65,536
        characters (422, "body is too long"), a limit its OpenAPI description does not state."""
        text = self.field("body", resource) if required else self.body.get("body")
        if isinstance(text, str) and len(text) > BODY_LIMIT:
            raise ApiError(422, "Validation Failed", [{"resource": resource, "code": "custom",
                           "field": "body", "message": f"body is too long (maximum is "
                           f"{BODY_LIMIT} characters)"}])  # fmt: skip
        return text

    def q(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, [default])[0]

    def number(self, name: str = "number") -> int:
        return int(self.params[name])


BODY_LIMIT = 65_536
Route = tuple[str, re.Pattern[str], Callable[[Call], tuple[int, Any]], str]
ROUTES: list[Route] = []
# Each handler's path in GitHub's OpenAPI description, for the contract test.
_R = "/repos/{owner}/{repo}"
TEMPLATES = {
    "rate_limit": "/rate_limit", "authenticated_user": "/user", "get_repo": _R, "list_issues": f"{_R}/issues",
    "create_issue": f"{_R}/issues", "get_issue": f"{_R}/issues/{{issue_number}}",
    "update_issue": f"{_R}/issues/{{issue_number}}",
    "list_comments": f"{_R}/issues/{{issue_number}}/comments",
    "create_comment": f"{_R}/issues/{{issue_number}}/comments",
    "get_comment": f"{_R}/issues/comments/{{comment_id}}",
    "update_comment": f"{_R}/issues/comments/{{comment_id}}",
    "react": f"{_R}/issues/comments/{{comment_id}}/reactions",
    "create_check_run": f"{_R}/check-runs", "update_check_run": f"{_R}/check-runs/{{check_run_id}}",
    "list_annotations": f"{_R}/check-runs/{{check_run_id}}/annotations",
    "list_check_runs": f"{_R}/commits/{{ref}}/check-runs", "create_status": f"{_R}/statuses/{{sha}}",
    "list_statuses": f"{_R}/commits/{{ref}}/statuses", "list_pulls": f"{_R}/pulls",
    "create_pull": f"{_R}/pulls", "update_pull": f"{_R}/pulls/{{pull_number}}",
    "permission": f"{_R}/collaborators/{{username}}/permission",
    "get_workflow": f"{_R}/actions/workflows/{{workflow_id}}",
    "dispatch": f"{_R}/actions/workflows/{{workflow_id}}/dispatches",
    "list_runs": f"{_R}/actions/runs", "list_jobs": f"{_R}/actions/runs/{{run_id}}/jobs",
    "get_run": f"{_R}/actions/runs/{{run_id}}",
    "cancel_run": f"{_R}/actions/runs/{{run_id}}/cancel", "get_commit": f"{_R}/commits/{{ref}}",
    "list_run_artifacts": f"{_R}/actions/runs/{{run_id}}/artifacts",
    "download_artifact": f"{_R}/actions/artifacts/{{artifact_id}}/{{archive_format}}",
}  # fmt: skip
_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"


def route(
    method: str, pattern: str
) -> Callable[[Callable[[Call], tuple[int, Any]]], Callable[[Call], tuple[int, Any]]]:
    def register(handler: Callable[[Call], tuple[int, Any]]) -> Callable[[Call], tuple[int, Any]]:
        template = TEMPLATES[handler.__name__]
        ROUTES.append((method, re.compile(pattern.replace("{REPO}", _REPO)), handler, template))
        return handler

    return register


@route("GET", "/rate_limit")
def rate_limit(call: Call) -> tuple[int, Any]:
    core = {"limit": 5000, "remaining": 4999, "reset": 0, "used": 1}
    return 200, {"resources": {"core": core, "graphql": core}, "rate": core}


@route("GET", "/user")
def authenticated_user(call: Call) -> tuple[int, Any]:
    # An installation token (GITHUB_TOKEN, an app's) is no user: GitHub refuses it here.
    if call.login.endswith("[bot]"):
        raise ApiError(403, "Resource not accessible by integration")
    profile = {
        "name": None, "company": None, "blog": "", "location": None, "email": None,
        "hireable": None, "bio": None, "public_repos": 0, "public_gists": 0, "followers": 0,
        "following": 0, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    return 200, {**call.state.user(call.login), **profile}


@route("GET", "{REPO}")
def get_repo(call: Call) -> tuple[int, Any]:
    return 200, call.state.repo_json(call.repo)


# -- issues ------------------------------------------------------------------------------
def _issue(call: Call) -> Json:
    issue = call.repo.issues.get(call.number())
    if issue is None:
        raise ApiError(404, "Not Found")
    return issue


@route("GET", "{REPO}/issues")
def list_issues(call: Call) -> tuple[int, Any]:
    wanted = call.q("state", "open")
    issues = sorted(call.repo.issues.values(), key=lambda issue: -issue["number"])
    return 200, [i for i in issues if wanted == "all" or i["state"] == wanted]


@route("POST", "{REPO}/issues")
def create_issue(call: Call) -> tuple[int, Any]:
    title = call.field("title", "Issue")
    with call.lock:
        return 201, call.state.new_issue(
            call.repo, title, call.body_text("Issue", False), call.login
        )


@route("GET", "{REPO}/issues/(?P<number>[0-9]+)")
def get_issue(call: Call) -> tuple[int, Any]:
    return 200, _issue(call)


@route("PATCH", "{REPO}/issues/(?P<number>[0-9]+)")
def update_issue(call: Call) -> tuple[int, Any]:
    call.body_text("Issue", False)
    with call.lock:
        issue = _issue(call)
        for key in ("title", "body", "state", "state_reason"):
            if key in call.body:
                issue[key] = call.body[key]
        if call.body.get("state") == "closed":
            issue["closed_at"] = issue["closed_at"] or now_iso()
            issue["state_reason"] = call.body.get("state_reason") or "completed"
        issue["updated_at"] = now_iso()
        return 200, issue


@route("GET", "{REPO}/issues/(?P<number>[0-9]+)/comments")
def list_comments(call: Call) -> tuple[int, Any]:
    issue = _issue(call)
    return 200, [c for c in call.repo.comments.values() if c["issue_url"] == issue["url"]]


@route("POST", "{REPO}/issues/(?P<number>[0-9]+)/comments")
def create_comment(call: Call) -> tuple[int, Any]:
    body = call.body_text("IssueComment")
    with call.lock:
        return 201, call.state.new_comment(call.repo, _issue(call), body, call.login)


def _comment(call: Call) -> Json:
    comment = call.repo.comments.get(call.number("comment_id"))
    if comment is None:
        raise ApiError(404, "Not Found")
    return comment


@route("GET", "{REPO}/issues/comments/(?P<comment_id>[0-9]+)")
def get_comment(call: Call) -> tuple[int, Any]:
    return 200, _comment(call)


@route("PATCH", "{REPO}/issues/comments/(?P<comment_id>[0-9]+)")
def update_comment(call: Call) -> tuple[int, Any]:
    body = call.body_text("IssueComment")
    with call.lock:
        comment = _comment(call)
        comment["body"] = body
        comment["updated_at"] = now_iso()
        return 200, comment


@route("POST", "{REPO}/issues/comments/(?P<comment_id>[0-9]+)/reactions")
def react(call: Call) -> tuple[int, Any]:
    content = call.field("content", "Reaction")
    if content not in REACTIONS:
        raise ApiError(422, "Validation Failed",
                       [{"resource": "Reaction", "field": "content", "code": "invalid"}])  # fmt: skip
    with call.lock:
        comment = _comment(call)
        existing = call.repo.reactions.setdefault(comment["id"], [])
        for reaction in existing:
            if reaction["content"] == content and reaction["user"]["login"] == call.login:
                return 200, reaction
        reaction_id = call.state.next_id()
        reaction = {"id": reaction_id, "node_id": f"REA_{reaction_id}", "user": call.state.user(call.login),
                    "content": content, "created_at": now_iso()}  # fmt: skip
        existing.append(reaction)
        return 201, reaction


# -- checks and statuses -------------------------------------------------------------------
def _refuse_checks(call: Call) -> None:
    if call.repo.check_runs_refused:
        raise ApiError(403, "Resource not accessible by integration")


@route("POST", "{REPO}/check-runs")
def create_check_run(call: Call) -> tuple[int, Any]:
    _refuse_checks(call)
    name = call.field("name", "CheckRun")
    head_sha = call.field("head_sha", "CheckRun")
    with call.lock:
        run_id = call.state.next_id()
        run: Json = {
            "id": run_id, "node_id": f"CR_{run_id}", "head_sha": head_sha, "external_id": "",
            "url": call.state.api(f"/repos/{call.repo.full_name}/check-runs/{run_id}"),
            "html_url": f"https://github.example/{call.repo.full_name}/runs/{run_id}",
            "details_url": call.body.get("details_url"), "status": "queued", "conclusion": None,
            "started_at": now_iso(), "completed_at": None, "name": name,
            "output": {"title": None, "summary": None, "text": None, "annotations_count": 0,
                       "annotations_url": ""},
            "check_suite": {"id": 1}, "app": None, "pull_requests": [],
        }  # fmt: skip
        run["output"]["annotations_url"] = f"{run['url']}/annotations"
        call.repo.annotations[run_id] = []
        call.repo.check_runs[run_id] = _apply_check(call, run)
        return 201, run


@route("PATCH", "{REPO}/check-runs/(?P<run_id>[0-9]+)")
def update_check_run(call: Call) -> tuple[int, Any]:
    _refuse_checks(call)
    with call.lock:
        run = call.repo.check_runs.get(call.number("run_id"))
        if run is None:
            raise ApiError(404, "Not Found")
        return 200, _apply_check(call, run)


@route("GET", "{REPO}/check-runs/(?P<run_id>[0-9]+)/annotations")
def list_annotations(call: Call) -> tuple[int, Any]:
    annotations = call.repo.annotations.get(call.number("run_id"))
    if annotations is None:
        raise ApiError(404, "Not Found")
    return 200, list(annotations)


def _apply_check(call: Call, run: Json) -> Json:
    """GitHub's semantics: output fields replace, annotations are APPENDED to the ones the run
    already has ("each time you update the check run, annotations are appended"), at most 50
    per request."""
    body = call.body
    if body.get("conclusion"):
        run["status"], run["conclusion"] = "completed", body["conclusion"]
        run["completed_at"] = now_iso()
    elif body.get("status"):
        run["status"] = body["status"]
    output = body.get("output") or {}
    for key in ("title", "summary", "text"):
        if key in output:
            run["output"][key] = output[key]
    annotations = output.get("annotations") or []
    if len(annotations) > 50:
        raise ApiError(422, "Invalid request.\n\nOnly 50 annotations are allowed per request.")
    stored = call.repo.annotations.setdefault(run["id"], [])
    blob = f"https://github.example/{call.repo.full_name}/blob/{run['head_sha']}"
    stored.extend(
        {"path": a["path"], "start_line": a["start_line"], "end_line": a["end_line"],
         "start_column": a.get("start_column"), "end_column": a.get("end_column"),
         "annotation_level": a["annotation_level"], "title": a.get("title"),
         "message": a["message"], "raw_details": a.get("raw_details"),
         "blob_href": f"{blob}/{a['path']}"}
        for a in annotations
    )  # fmt: skip
    run["output"]["annotations_count"] = len(stored)
    return run


@route("GET", "{REPO}/commits/(?P<sha>[0-9a-f]{40})/check-runs")
def list_check_runs(call: Call) -> tuple[int, Any]:
    runs = [r for r in call.repo.check_runs.values() if r["head_sha"] == call.params["sha"]]
    if call.q("check_name"):
        runs = [r for r in runs if r["name"] == call.q("check_name")]
    return 200, {"total_count": len(runs), "check_runs": runs}


@route("POST", "{REPO}/statuses/(?P<sha>[0-9a-f]{40})")
def create_status(call: Call) -> tuple[int, Any]:
    state = call.field("state", "Status")
    if state not in ("error", "failure", "pending", "success"):
        raise ApiError(
            422, "Validation Failed", [{"resource": "Status", "field": "state", "code": "invalid"}]
        )
    with call.lock:
        status_id = call.state.next_id()
        status = {
            "id": status_id, "node_id": f"SC_{status_id}", "state": state, "sha": call.params["sha"],
            "url": call.state.api(f"/repos/{call.repo.full_name}/statuses/{call.params['sha']}"),
            "description": call.body.get("description"), "target_url": call.body.get("target_url"),
            "context": call.body.get("context", "default"), "creator": call.state.user(call.login),
            "created_at": now_iso(), "updated_at": now_iso(), "avatar_url": None,
        }  # fmt: skip
        call.repo.statuses.append(status)
        return 201, status


@route("GET", "{REPO}/commits/(?P<sha>[0-9a-f]{40})/statuses")
def list_statuses(call: Call) -> tuple[int, Any]:
    return 200, [s for s in reversed(call.repo.statuses) if s["sha"] == call.params["sha"]]


# -- pull requests ---------------------------------------------------------------------------
@route("GET", "{REPO}/pulls")
def list_pulls(call: Call) -> tuple[int, Any]:
    wanted, head, base = call.q("state", "open"), call.q("head"), call.q("base")
    pulls = []
    for pull in sorted(call.repo.pulls.values(), key=lambda p: -p["number"]):
        if wanted != "all" and pull["state"] != wanted:
            continue
        if head and pull["head"]["label"] != head:
            continue
        if base and pull["base"]["ref"] != base:
            continue
        pulls.append(pull)
    return 200, pulls


@route("POST", "{REPO}/pulls")
def create_pull(call: Call) -> tuple[int, Any]:
    repo = call.repo
    title, head, base = (call.field(name, "PullRequest") for name in ("title", "head", "base"))
    label = head if ":" in head else f"{repo.owner}:{head}"
    if repo.pulls_refused:
        raise ApiError(403, "GitHub Actions is not permitted to create or approve pull requests.")
    with call.lock:
        for pull in repo.pulls.values():
            if (
                pull["state"] == "open"
                and pull["head"]["label"] == label
                and pull["base"]["ref"] == base
            ):
                raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom",
                               "message": f"A pull request already exists for {label}."}])  # fmt: skip
        issue = call.state.new_issue(repo, title, call.body_text("PullRequest", False), call.login)
        number = issue["number"]
        del repo.issues[number]  # a PR is also an issue on GitHub; keep it in `pulls` here
        url = call.state.api(f"/repos/{repo.full_name}/pulls/{number}")
        html = f"https://github.example/{repo.full_name}/pull/{number}"
        issue_url = call.state.api(f"/repos/{repo.full_name}/issues/{number}")
        full = call.state.repo_json(repo)

        def side(ref_label: str, ref: str) -> Json:
            return {
                "label": ref_label,
                "ref": ref,
                "sha": "0" * 40,
                "user": call.state.user(repo.owner),
                "repo": full,
            }

        pull = {
            **issue,
            "url": url, "html_url": html, "issue_url": issue_url,
            "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "commits_url": f"{url}/commits", "review_comments_url": f"{url}/comments",
            "review_comment_url": call.state.api(f"/repos/{repo.full_name}/pulls/comments{{/number}}"),
            "comments_url": f"{issue_url}/comments",
            "statuses_url": call.state.api(f"/repos/{repo.full_name}/statuses/{'0' * 40}"),
            "head": side(label, label.split(":", 1)[1]),
            "base": side(f"{repo.owner}:{base}", base),
            "_links": {name: {"href": href} for name, href in {
                "self": url, "html": html, "issue": issue_url, "comments": f"{issue_url}/comments",
                "review_comments": f"{url}/comments", "commits": f"{url}/commits",
                "statuses": call.state.api(f"/repos/{repo.full_name}/statuses/{'0' * 40}"),
                "review_comment": call.state.api(f"/repos/{repo.full_name}/pulls/comments{{/number}}"),
            }.items()},
            "draft": bool(call.body.get("draft")), "merged": False, "merged_at": None, "merged_by": None,
            "mergeable": None, "mergeable_state": "unknown", "merge_commit_sha": None,
            "auto_merge": None, "maintainer_can_modify": False, "additions": 0, "deletions": 0,
            "changed_files": 0, "commits": 0, "comments": 0, "review_comments": 0,
        }  # fmt: skip
        repo.pulls[number] = pull
        return 201, pull


@route("PATCH", "{REPO}/pulls/(?P<number>[0-9]+)")
def update_pull(call: Call) -> tuple[int, Any]:
    call.body_text("PullRequest", False)
    with call.lock:
        pull = call.repo.pulls.get(call.number())
        if pull is None:
            raise ApiError(404, "Not Found")
        for key in ("title", "body", "state"):
            if key in call.body:
                pull[key] = call.body[key]
        pull["updated_at"] = now_iso()
        return 200, pull


# -- people and workflows --------------------------------------------------------------------
@route("GET", "{REPO}/collaborators/(?P<user>[^/]+)/permission")
def permission(call: Call) -> tuple[int, Any]:
    level = call.repo.collaborators.get(call.params["user"], "read")
    role = {"none": "none", "read": "read", "triage": "triage", "write": "write",
            "maintain": "maintain", "admin": "admin"}[level]  # fmt: skip
    # GitHub's legacy `permission` field folds triage into read and maintain into write.
    legacy = {"triage": "read", "maintain": "write"}.get(level, level)
    user = {**call.state.user(call.params["user"]), "role_name": role}
    return 200, {"permission": legacy, "role_name": role, "user": user}


def _workflow(call: Call) -> Json:
    name = call.params["workflow_id"]
    workflow = call.repo.workflows.get(name)
    if workflow is None:
        raise ApiError(404, "Not Found")
    return workflow


@route("GET", "{REPO}/actions/workflows/(?P<workflow_id>[^/]+)")
def get_workflow(call: Call) -> tuple[int, Any]:
    return 200, _workflow(call)


@route("POST", "{REPO}/actions/workflows/(?P<workflow_id>[^/]+)/dispatches")
def dispatch(call: Call) -> tuple[int, Any]:
    ref = call.field("ref", "Workflow")
    inputs = call.body.get("inputs") or {}
    if not all(isinstance(value, str) for value in inputs.values()):
        raise ApiError(422, "Invalid request.\n\nFor 'properties/inputs', values must be strings.")
    with call.lock:
        if call.repo.dispatches_refused > 0:
            call.repo.dispatches_refused -= 1
            raise ApiError(403, "Resource not accessible by integration")
        workflow = _workflow(call)
        _check_inputs(call.repo.dispatch_inputs.get(workflow["path"].rsplit("/", 1)[1]), inputs)
        run_id = call.state.next_id()
        call.repo.dispatches.append({"workflow": workflow["path"], "ref": ref, "inputs": inputs})
        run = workflow_run(call.state, call.repo, workflow, ref, run_id)
        call.repo.runs[run_id] = run
        if call.body.get("return_run_details") is True:
            details = {
                "workflow_run_id": run_id,
                "run_url": run["url"],
                "html_url": run["html_url"],
            }
            return 200, details
        return 204, None


def _check_inputs(declared: dict[str, bool] | None, inputs: Json) -> None:
    """GitHub refuses a dispatch naming an input the workflow does not declare, or lacking a
    required one (422, messages as GitHub words them)."""
    if declared is None:
        return
    unexpected = sorted(set(inputs) - set(declared))
    if unexpected:
        raise ApiError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
    for name, required in declared.items():
        if required and name not in inputs:
            raise ApiError(422, f"Required input '{name}' not provided")


def workflow_run(state: FakeState, repo: FakeRepo, workflow: Json, ref: str, run_id: int) -> Json:
    """A queued `workflow_dispatch` run of `workflow`, as GitHub describes one."""
    base = state.api(f"/repos/{repo.full_name}/actions/runs/{run_id}")
    minimal = {key: value for key, value in state.repo_json(repo).items()
               if key not in ("permissions", "license")}  # fmt: skip
    return {
        "id": run_id, "node_id": f"WFR_{run_id}", "name": workflow["name"],
        "display_title": workflow["name"], "workflow_id": workflow["id"], "run_number": len(repo.runs) + 1,
        "status": "queued", "conclusion": None, "event": "workflow_dispatch", "head_branch": ref,
        "head_sha": "0" * 40, "run_attempt": 1, "path": workflow["path"], "created_at": now_iso(),
        "updated_at": now_iso(), "url": base,
        "html_url": f"https://github.example/{repo.full_name}/actions/runs/{run_id}",
        "jobs_url": f"{base}/jobs", "logs_url": f"{base}/logs", "cancel_url": f"{base}/cancel",
        "rerun_url": f"{base}/rerun", "artifacts_url": f"{base}/artifacts",
        "check_suite_url": state.api(f"/repos/{repo.full_name}/check-suites/1"),
        "workflow_url": workflow["url"], "head_commit": None, "pull_requests": [],
        "head_repository": minimal, "repository": minimal,
    }  # fmt: skip


def workflow_job(
    state: FakeState, repo: FakeRepo, run: Json, job_id: int, *, name: str, created_at: str
) -> Json:
    """A queued job of `run`, as GitHub describes one."""
    base = state.api(f"/repos/{repo.full_name}/actions/jobs/{job_id}")
    return {
        "id": job_id, "run_id": run["id"], "run_url": run["url"], "run_attempt": run["run_attempt"],
        "node_id": f"CR_{job_id}", "head_sha": run["head_sha"], "url": base,
        "html_url": f"https://github.example/{repo.full_name}/actions/runs/{run['id']}/job/{job_id}",
        "status": "queued", "conclusion": None, "created_at": created_at, "started_at": created_at,
        "completed_at": None, "name": name, "steps": [],
        "check_run_url": state.api(f"/repos/{repo.full_name}/check-runs/{job_id}"),
        "labels": ["ubuntu-latest"], "runner_id": None, "runner_name": None,
        "runner_group_id": None, "runner_group_name": None, "workflow_name": run["name"],
        "head_branch": run["head_branch"],
    }  # fmt: skip


def _run(call: Call) -> Json:
    run = call.repo.runs.get(call.number("run_id"))
    if run is None:
        raise ApiError(404, "Not Found")
    return run


@route("GET", "{REPO}/actions/runs/(?P<run_id>[0-9]+)/artifacts")
def list_run_artifacts(call: Call) -> tuple[int, Any]:
    """The run's artifacts: the folders the upload stand-in made under the fake's
    `artifacts_root/<run id>/`, each an artifact of its folder's name."""
    run = _run(call)
    root = call.state.artifacts_root
    folder = root / str(run["id"]) if root is not None else None
    found = []
    with call.lock:
        for path in sorted(folder.iterdir()) if folder is not None and folder.is_dir() else []:
            known = [
                i for i, (r, n) in call.repo.artifacts.items() if (r, n) == (run["id"], path.name)
            ]
            artifact_id = known[0] if known else call.state.next_id()
            call.repo.artifacts[artifact_id] = (run["id"], path.name)
            found.append(_artifact(call, artifact_id, run, path))
    return 200, {"total_count": len(found), "artifacts": found}


def _artifact(call: Call, artifact_id: int, run: Json, folder: Path) -> Json:
    base = call.state.api(f"/repos/{call.repo.full_name}/actions/artifacts/{artifact_id}")
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "id": artifact_id, "node_id": f"MDg6QXJ0aWZhY3Q{artifact_id}", "name": folder.name,
        "size_in_bytes": size, "url": base, "archive_download_url": f"{base}/zip",
        "expired": False, "created_at": now_iso(), "expires_at": now_iso(), "updated_at": now_iso(),
        "digest": None,
        "workflow_run": {"id": run["id"], "repository_id": call.repo.id,
                         "head_repository_id": call.repo.id, "head_branch": run["head_branch"],
                         "head_sha": run["head_sha"]},
    }  # fmt: skip


@route("GET", "{REPO}/actions/artifacts/(?P<artifact_id>[0-9]+)/(?P<archive_format>[^/]+)")
def download_artifact(call: Call) -> tuple[int, Any]:
    """GitHub answers 302 to a short-lived URL of its storage; the fake's is `/_blobs/...`."""
    if call.params["archive_format"] != "zip":
        raise ApiError(404, "Not Found")
    with call.lock:
        if call.number("artifact_id") not in call.repo.artifacts:
            raise ApiError(404, "Not Found")
    location = call.state.api(
        f"/_blobs/{call.repo.full_name}/artifacts/{call.number('artifact_id')}.zip"
    )
    return 302, Redirect(location)


@route("GET", "{REPO}/actions/runs/(?P<run_id>[0-9]+)")
def get_run(call: Call) -> tuple[int, Any]:
    return 200, _run(call)


@route("GET", "{REPO}/actions/runs")
def list_runs(call: Call) -> tuple[int, Any]:
    runs = sorted(call.repo.runs.values(), key=lambda run: -run["id"])
    return 200, {"total_count": len(runs), "workflow_runs": runs}


@route("GET", "{REPO}/actions/runs/(?P<run_id>[0-9]+)/jobs")
def list_jobs(call: Call) -> tuple[int, Any]:
    """The run's jobs, `filter=latest` (GitHub's default: the latest attempt) or `all`; paged
    like GitHub pages this endpoint (`total_count` and the page's `jobs`)."""
    run = _run(call)
    wanted = call.query.get("filter", ["latest"])[0]
    if wanted not in ("latest", "all"):
        raise ApiError(422, "Invalid request.\n\nfilter must be one of latest, all.")
    jobs = [job for job in call.repo.jobs.values() if job["run_id"] == run["id"]
            and (wanted == "all" or job["run_attempt"] == run["run_attempt"])]  # fmt: skip
    return 200, {"total_count": len(jobs), "jobs": sorted(jobs, key=lambda job: job["id"])}


@route("POST", "{REPO}/actions/runs/(?P<run_id>[0-9]+)/cancel")
def cancel_run(call: Call) -> tuple[int, Any]:
    with call.lock:
        run = call.repo.runs.get(call.number("run_id"))
        if run is None:
            raise ApiError(404, "Not Found")
        if run["status"] == "completed":
            raise ApiError(409, "Cannot cancel a workflow run that is completed.")
        run["status"], run["conclusion"] = "completed", "cancelled"
        return 202, {}


@route("GET", "{REPO}/commits/(?P<sha>[0-9a-f]{40})")
def get_commit(call: Call) -> tuple[int, Any]:
    # The fake holds no git objects: any full commit id is a commit (the product only ever
    # names commits it pushed).
    sha = call.params["sha"]
    person = {
        "name": "imm-action",
        "email": "imm-action@users.noreply.github.com",
        "date": now_iso(),
    }
    return 200, {
        "sha": sha, "node_id": f"C_{sha[:10]}",
        "url": call.state.api(f"/repos/{call.repo.full_name}/commits/{sha}"),
        "html_url": f"https://github.example/{call.repo.full_name}/commit/{sha}",
        "commit": {"message": "", "author": person, "committer": person,
                   "tree": {"sha": "0" * 40, "url": ""}},
        "comments_url": call.state.api(f"/repos/{call.repo.full_name}/commits/{sha}/comments"),
        "author": None, "committer": None, "parents": [],
    }  # fmt: skip
