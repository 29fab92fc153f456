"""What the GitHub client stands on: PyGithub built on `GITHUB_API_URL` with GET-only transport
retries, which failures pass (and how long to wait before the next try), the errors the client
raises, the plain records it returns, and the permission order."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.WorkflowJob import WorkflowJob
from tenacity import (
    RetryCallState,
)
from urllib3.util.retry import Retry

from imm_action.errors import EXIT_INVALID_INPUT, ImmError

PERMISSION_ORDER = ("none", "read", "triage", "write", "maintain", "admin")


class GitHubUnavailableError(ImmError):
    """GitHub kept failing past our retry budget; nothing half-done was left behind."""


class PullRequestsRefusedError(ImmError):
    """The repository does not let GitHub Actions create pull requests (a setting)."""


class GitHubQueryError(ImmError):
    """GitHub refused a GraphQL query (invalid document, unknown repository or issue, no
    access): the request's fault, so exit 2 with GitHub's own words."""

    exit_code = EXIT_INVALID_INPUT


class GitHubAuthError(ImmError):
    """GitHub refused the token itself (401): wrong, expired or revoked. Exit 2, nothing done."""

    exit_code = EXIT_INVALID_INPUT


class DispatchRefusedError(ImmError):
    """GitHub refused a workflow dispatch (422: an input the workflow does not declare, a ref
    that does not exist, no `workflow_dispatch` trigger): no run started; retrying cannot help."""

    exit_code = EXIT_INVALID_INPUT


class TransientQueryError(Exception):
    """A GraphQL answer whose errors GitHub marks as passing (rate limit, timeout)."""


# Error types GitHub gives to failures that a later attempt may not meet.
_TRANSIENT_TYPES = frozenset({"RATE_LIMITED", "SERVICE_UNAVAILABLE", "TIMEOUT", "INTERNAL"})


_TRANSIENT_WORDS = ("something went wrong", "timeout", "timed out", "try again")


_OPERATION = re.compile(r"\b(query|mutation)\s+([_A-Za-z][_0-9A-Za-z]*)")


def operation_name(document: str) -> str:
    found = _OPERATION.search(document)
    return found.group(2) if found else "(anonymous)"


def query_failure(document: str, errors: Sequence[Any]) -> Exception:
    messages = [
        str(error.get("message", error)) if isinstance(error, dict) else str(error)
        for error in errors
    ] or ["no message"]
    types = {str(error.get("type", "")) for error in errors if isinstance(error, dict)}
    transient = bool(types & _TRANSIENT_TYPES) or any(
        word in message.lower() for message in messages for word in _TRANSIENT_WORDS
    )
    text = f"GitHub refused the GraphQL query {operation_name(document)}: " + "; ".join(messages)
    return TransientQueryError(text) if transient else GitHubQueryError(text)


@dataclass(frozen=True)
class DispatchedRun:
    """The run GitHub started for a dispatch (`return_run_details`)."""

    run_id: int
    html_url: str


@dataclass(frozen=True)
class ArtifactInfo:
    """One artifact of a workflow run."""

    id: int
    name: str
    size: int


@dataclass(frozen=True)
class WorkflowJobInfo:
    """What a pass needs of one job of a workflow run."""

    id: int
    name: str
    status: str  # queued, in_progress, completed, waiting, requested, pending
    conclusion: str | None
    html_url: str
    created_at: datetime


@dataclass(frozen=True)
class RetryBudget:
    attempts: int = 6
    seconds: float = 120.0
    max_wait: float = 10.0


def build_github(token: str, api_url: str, *, timeout: int = 20) -> Github:
    # Transport retries only for idempotent methods (GitHub's default retry repeats POST, which
    # duplicates comments); 403 secondary limits and 5xx are retried, honouring Retry-After.
    retry = GithubRetry(
        total=4,
        backoff_factor=0.2,
        secondary_rate_wait=5,
        max_rate_limit_wait=60,
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS,
    )
    return Github(
        auth=Auth.Token(token),
        base_url=api_url,
        retry=retry,
        timeout=timeout,
        per_page=100,
        seconds_between_requests=None,
        seconds_between_writes=None,
        user_agent="imm-action",
        lazy=True,  # objects are fetched when used: no GET of the repository before each call
    )


def retriable(error: BaseException) -> bool:
    if isinstance(error, GithubException):
        secondary = error.status == 403 and "rate limit" in str(error.data).lower()
        return error.status >= 500 or error.status == 429 or secondary
    return isinstance(
        error, requests.exceptions.RequestException | ConnectionError | TransientQueryError
    )


def retry_wait(budget: RetryBudget) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        headers = getattr(error, "headers", None) or {}
        after = headers.get("retry-after") or headers.get("Retry-After")
        if after is not None:
            return float(min(float(str(after)), budget.max_wait))
        return float(min(0.1 * 2.0 ** (state.attempt_number - 1), budget.max_wait))

    return wait


def job_info(job: WorkflowJob) -> WorkflowJobInfo:
    created = job.created_at
    return WorkflowJobInfo(
        id=job.id,
        name=job.name,
        status=job.status,
        conclusion=job.conclusion,
        html_url=job.html_url,
        created_at=created if created.tzinfo else created.replace(tzinfo=UTC),
    )


def allows(role: str, needed: str) -> bool:
    """Whether `role` is at least `needed` in GitHub's order of repository roles."""
    known = {name: rank for rank, name in enumerate(PERMISSION_ORDER)}
    return known.get(role, 0) >= known.get(needed, len(PERMISSION_ORDER))
