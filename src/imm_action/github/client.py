"""The one GitHub client: PyGithub on `GITHUB_API_URL`, GET-only transport retries, and our own
bounded retries around every operation. Writes that are not idempotent (POST, PATCH) are upserts:
they look for what a lost response may already have created (by a hidden marker, a head branch,
a check name) before they create, so a retry never duplicates a comment, a PR or a check run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import requests
from github import Github, GithubException
from github.Artifact import Artifact
from github.CheckRun import CheckRun
from github.IssueComment import IssueComment
from github.PaginatedList import PaginatedList
from github.PullRequest import PullRequest
from github.Repository import Repository
from github.WorkflowJob import WorkflowJob
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from imm_action.github.transport import (
    ArtifactInfo,
    DispatchedRun,
    DispatchRefusedError,
    GitHubAuthError,
    GitHubQueryError,
    GitHubUnavailableError,
    PullRequestsRefusedError,
    RetryBudget,
    TransientQueryError,
    WorkflowJobInfo,
    job_info,
    operation_name,
    query_failure,
    retriable,
    retry_wait,
)

T = TypeVar("T")


# GitHub refuses a comment's, an issue's or a pull request's body over 65,536 characters (422,
# "body is too long"; its OpenAPI description does not say so).
BODY_LIMIT = 65_536
CUT_NOTE = f"\n\n_… the rest is left out: GitHub takes {BODY_LIMIT:,} characters here._\n"


def fit_body(text: str, limit: int = BODY_LIMIT) -> str:
    """`text`, cut to `limit` characters saying so when it is longer: a report too long for
    GitHub is posted cut, never refused."""
    return text if len(text) <= limit else text[: limit - len(CUT_NOTE)] + CUT_NOTE


class GitHubClient:
    def __init__(
        self,
        github: Github,
        repository: str,
        budget: RetryBudget | None = None,
        *,
        graphql_url: str | None = None,
    ) -> None:
        self._github = github
        # GITHUB_GRAPHQL_URL, where set, wins over the URL PyGithub derives from the REST one.
        self._graphql_url = graphql_url or github.requester.graphql_url
        self._repository_name = repository
        self._repository: Repository | None = None
        self._login: str | None = None  # who the token acts as, once asked ("" for an app)
        self.budget = budget or RetryBudget()

    def _repo(self) -> Repository:
        if self._repository is None:
            self._repository = self._github.get_repo(self._repository_name)
        return self._repository

    def repository_id(self) -> str:
        """GitHub's numeric id of the repository (what the tracker's repo-id marker holds),
        for runs outside Actions, where GITHUB_REPOSITORY_ID is not set."""
        try:
            return str(self.call("reading the repository", lambda: self._repo().id))
        except GithubException as error:
            if error.status in (403, 404):
                raise GitHubQueryError(
                    f"GitHub has no repository {self._repository_name} this token can see "
                    f"({error.status}): check GITHUB_REPOSITORY and the token"
                ) from None
            raise

    def call(self, what: str, operation: Callable[[], T]) -> T:
        """Run `operation`, again on passing failures, up to the budget; then a clear error."""
        retrying = Retrying(
            retry=retry_if_exception(retriable),
            stop=stop_after_attempt(self.budget.attempts) | stop_after_delay(self.budget.seconds),
            wait=retry_wait(self.budget),
            reraise=True,
        )
        try:
            return retrying(operation)
        except (
            GithubException,
            requests.exceptions.RequestException,
            ConnectionError,
            TransientQueryError,
        ) as error:
            if isinstance(error, GithubException) and error.status == 401:
                said = error.data.get("message") if isinstance(error.data, dict) else error.data
                raise GitHubAuthError(
                    f"GitHub refused the token while trying to {what} (401 {said}): "
                    "check the token (IMM_TOKEN or GITHUB_TOKEN)"
                ) from None
            if retriable(error):
                raise GitHubUnavailableError(
                    f"GitHub kept failing while trying to {what} "
                    f"({self.budget.attempts} attempts): {error}"
                ) from None
            raise

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """A GraphQL query (a read: safe to repeat), its `data`. GitHub answers a refused query
        with `errors` (HTTP 200, or 400/422): a clear failure naming the query and GitHub's
        message, retried only when GitHub says it is passing."""

        def query_once() -> dict[str, Any]:
            try:
                _, payload = self._github.requester.requestJsonAndCheck(
                    "POST", self._graphql_url, input={"query": query, "variables": variables}
                )
            except GithubException as error:
                if error.status in (400, 422) and isinstance(error.data, dict):
                    found = error.data.get("errors") or [error.data]
                    raise query_failure(query, found) from None
                raise
            if payload.get("errors") or payload.get("data") is None:
                raise query_failure(query, payload.get("errors") or [])
            data: dict[str, Any] = payload["data"]
            return data

        return self.call(f"run the GraphQL query {operation_name(query)}", query_once)

    # -- comments --------------------------------------------------------------------------------
    def upsert_comment(self, issue_number: int, marker: str, body: str) -> IssueComment:
        """The one comment on an issue that carries `marker`, created or edited in place."""
        text = fit_body(body if marker in body else f"{marker}\n{body}")

        def upsert() -> IssueComment:
            issue = self._repo().get_issue(issue_number)
            for comment in issue.get_comments():
                if marker in (comment.body or "") and self._wrote(comment):
                    if comment.body != text:
                        comment.edit(text)
                    return comment
            return issue.create_comment(text)

        return self.call(f"update the status comment on #{issue_number}", upsert)

    def _wrote(self, comment: IssueComment) -> bool:
        """Whether our token wrote `comment`: anyone may paste our marker into a comment of
        theirs, and that must not become the status comment. An installation token (the
        workflow's GITHUB_TOKEN, an app's) writes as a bot; a person's token as that person,
        asked of `GET /user` only when a person's comment carries the marker."""
        author = comment.user
        if author is None:
            return False
        if author.type == "Bot":
            return True
        if self._login is None:
            try:
                self._login = self._github.get_user().login
            except GithubException as error:
                if error.status not in (401, 403, 404):
                    raise
                self._login = ""  # an installation token: no person wrote our comments
        return bool(self._login) and author.login == self._login

    def react(self, issue_number: int, comment_id: int, content: str) -> None:
        def reaction() -> None:
            self._repo().get_issue(issue_number).get_comment(comment_id).create_reaction(content)

        self.call("react to the command", reaction)

    def reply(self, issue_number: int, marker: str, body: str) -> IssueComment:
        """A reply to one command, made once even if the request is retried."""
        return self.upsert_comment(issue_number, marker, body)

    # -- checks ----------------------------------------------------------------------------------
    def report_check(
        self,
        head_sha: str,
        name: str,
        *,
        conclusion: str | None,
        title: str,
        summary: str,
        annotations: Sequence[dict[str, Any]] = (),
    ) -> str:
        """A check run `name` on `head_sha` (in progress, or completed with `conclusion`); a
        commit status where check runs are refused. Returns which one was written."""

        def check() -> str:
            output: dict[str, Any] = {"title": title, "summary": summary[:65_000]}
            existing = self._check_run(head_sha, name)
            # GitHub appends the annotations of every update to those the run has: send only
            # the ones it does not have yet (a rerun, or a retry after a lost response), and at
            # most 50 per request, as GitHub requires.
            have = set()
            if existing is not None and annotations:
                have = {_annotation_key(a.raw_data) for a in existing.get_annotations()}
            fresh = _new_annotations(annotations, have)
            fields: dict[str, Any] = {"output": {**output, "annotations": fresh[:50]}}
            if conclusion is None:
                fields["status"] = "in_progress"
            else:
                fields["conclusion"] = conclusion
            if existing is not None:
                existing.edit(**fields)
            else:
                existing = self._repo().create_check_run(name=name, head_sha=head_sha, **fields)
            for start in range(50, len(fresh), 50):
                existing.edit(output={**output, "annotations": fresh[start : start + 50]})
            return "check_run"

        try:
            return self.call(f"report the check {name}", check)
        except GithubException as error:
            if error.status not in (403, 404):
                raise
        state = {"success": "success", None: "pending"}.get(conclusion, "failure")
        self.call(
            f"set the commit status {name}",
            lambda: (
                self._repo()
                .get_commit(head_sha)
                .create_status(state, description=title[:140], context=name)
            ),
        )
        return "status"

    def end_check(self, head_sha: str, name: str, *, conclusion: str, title: str) -> bool:
        """End the check run `name` on `head_sha` if it is still going (queued or in progress),
        with `conclusion`; True when one was ended. A commit the batch moved on from must not
        keep a pending check forever (on `main`, where the batch branch started)."""

        def end() -> bool:
            existing = self._check_run(head_sha, name)
            if existing is None or existing.status == "completed":
                return False
            summary = existing.output.summary if existing.output else None
            existing.edit(
                conclusion=conclusion, output={"title": title[:255], "summary": summary or title}
            )
            return True

        try:
            return self.call(f"end the check {name}", end)
        except GithubException as error:
            if error.status not in (403, 404):  # refused: a commit status was used instead
                raise
        return False

    def _check_run(self, head_sha: str, name: str) -> CheckRun | None:
        for run in self._repo().get_commit(head_sha).get_check_runs(check_name=name):
            return run
        return None

    # -- pull requests ---------------------------------------------------------------------------
    def ensure_pull(self, head: str, base: str, title: str, body: str) -> PullRequest:
        """The open PR from `head` into `base`, created once and then kept up to date."""
        owner = self._repository_name.split("/")[0]
        body = fit_body(body)

        def ensure() -> PullRequest:
            repo = self._repo()
            for pull in repo.get_pulls(state="open", head=f"{owner}:{head}", base=base):
                if pull.body != body or pull.title != title:
                    pull.edit(title=title, body=body)
                return pull
            try:
                return repo.create_pull(title=title, body=body, head=head, base=base)
            except GithubException as error:
                if error.status == 422 and "already exists" in str(error.data):
                    raise ConnectionError("created by a lost request; look again") from None
                if error.status == 403 and "not permitted to create" in str(error.data):
                    raise PullRequestsRefusedError(str(error.data)) from None
                raise

        return self.call(f"update the pull request from {head}", ensure)

    # -- people, issues, workflows ---------------------------------------------------------------
    def permission(self, login: str) -> str:
        """The user's role on the repository (`none`..`admin`), checked through the API."""
        return self.call(
            f"check {login}'s permission",
            lambda: self._repo().get_collaborator_role_name(login) or "none",
        )

    def close_issue(self, number: int) -> None:
        def close() -> None:
            issue = self._repo().get_issue(number)
            if issue.state != "closed":
                issue.edit(state="closed", state_reason="completed")

        self.call(f"close #{number}", close)

    def cancel_run(self, run_id: int) -> bool:
        """Ask GitHub to cancel workflow run `run_id`; False when it has ended already (409) or
        is gone (404)."""
        url = f"{self._repo().url}/actions/runs/{run_id}/cancel"

        def send() -> None:
            self._github.requester.requestJsonAndCheck("POST", url)

        try:
            self.call(f"cancel run {run_id}", send)
        except GithubException as error:
            if error.status in (404, 409):
                return False
            raise
        return True

    def run_artifacts(self, run_id: int, prefix: str) -> list[ArtifactInfo]:
        """The unexpired artifacts of workflow run `run_id` whose names start with `prefix`
        (one request per page of 100); none when the run no longer exists."""

        def read() -> list[ArtifactInfo]:
            url = f"{self._repo().url}/actions/runs/{run_id}/artifacts"
            pages = PaginatedList(
                Artifact, self._github.requester, url, {"per_page": 100}, list_item="artifacts"
            )
            try:
                return [
                    ArtifactInfo(artifact.id, artifact.name, artifact.size_in_bytes)
                    for artifact in pages
                    if artifact.name.startswith(prefix) and not artifact.expired
                ]
            except GithubException as error:
                if error.status == 404:
                    return []
                raise

        return self.call(f"list the artifacts of run {run_id}", read)

    def download_artifact(self, artifact_id: int, limit: int) -> bytes | None:
        """An artifact's zip (GitHub redirects to its storage), or None when it is gone or
        larger than `limit` bytes."""

        def fetch() -> bytes | None:
            url = f"{self._repo().url}/actions/artifacts/{artifact_id}/zip"
            status, _, chunks = self._github.requester.getStream(url, chunk_size=1 << 16)
            if status in (404, 410):
                return None
            if status >= 400:
                raise GithubException(status, {"message": f"artifact {artifact_id}"}, None)
            data = bytearray()
            for chunk in chunks:
                data += chunk
                if len(data) > limit:
                    return None
            return bytes(data)

        return self.call(f"download artifact {artifact_id}", fetch)

    def run_jobs(self, run_id: int) -> list[WorkflowJobInfo] | None:
        """The jobs of a workflow run's latest attempt — one request per page of 100, and no
        read of the run itself — or None when the run no longer exists."""

        def read() -> list[WorkflowJobInfo] | None:
            url = f"{self._repo().url}/actions/runs/{run_id}/jobs"
            pages = PaginatedList(
                WorkflowJob, self._github.requester, url, {"filter": "latest"}, list_item="jobs"
            )
            try:
                return [job_info(job) for job in pages]
            except GithubException as error:
                if error.status == 404:
                    return None
                raise

        return self.call(f"list the jobs of workflow run {run_id}", read)

    def run_in_progress(self, run_id: int) -> bool:
        """Whether workflow run `run_id` has not completed yet (queued, waiting or in progress);
        False for a run that no longer exists."""

        def read() -> bool:
            try:
                return self._repo().get_workflow_run(run_id).status != "completed"
            except GithubException as error:
                if error.status == 404:
                    return False
                raise

        return self.call(f"read workflow run {run_id}", read)

    def dispatch(self, workflow: str, ref: str, inputs: dict[str, str]) -> DispatchedRun | None:
        """Start `workflow` on `ref`; the run GitHub started, where it says (a GitHub Enterprise
        Server without `return_run_details` answers 204 and names none)."""
        # Sent through the requester, not `Workflow.create_dispatch`: that answers a bare False
        # for every refusal, and a 422 must not be retried as if GitHub were down.
        url = f"{self._repo().url}/actions/workflows/{quote(workflow, safe='')}/dispatches"

        def send() -> DispatchedRun | None:
            _, data = self._github.requester.requestJsonAndCheck(
                "POST", url, input={"ref": ref, "inputs": inputs, "return_run_details": True}
            )
            if not isinstance(data, dict) or "workflow_run_id" not in data:
                return None
            return DispatchedRun(int(data["workflow_run_id"]), str(data.get("html_url", "")))

        try:
            return self.call(f"dispatch {workflow}", send)
        except GithubException as error:
            if error.status != 422:
                raise
            message = error.data.get("message") if isinstance(error.data, dict) else error.data
            raise DispatchRefusedError(
                f"GitHub refused to start {workflow} on {ref}: {message}"
            ) from None


def _annotation_key(annotation: Mapping[str, Any]) -> tuple[object, ...]:
    return tuple(
        annotation.get(key)
        for key in ("path", "start_line", "end_line", "annotation_level", "message")
    )


def _new_annotations(
    annotations: Sequence[Mapping[str, Any]], have: set[tuple[object, ...]]
) -> list[dict[str, Any]]:
    fresh = []
    for annotation in annotations:
        key = _annotation_key(annotation)
        if key not in have:
            have.add(key)
            fresh.append(dict(annotation))
    return fresh
