"""The event payloads the product reads from `$GITHUB_EVENT_PATH` — `issue_comment`,
`pull_request` and `workflow_dispatch` — the only way comment text and inputs reach the program
(never through a workflow expression). Each model reads only the fields it needs and accepts
everything else GitHub sends (tests start from GitHub's published examples)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from imm_action.errors import InputError, Problem

_INITIATIVE_MARKER = re.compile(
    r"<!--\s*immune-brain:initiative-id=([A-Za-z0-9][A-Za-z0-9._-]{0,127})\s*-->"
)


class _Payload(BaseModel):
    # GitHub's payloads carry far more than we read; only these fields matter here.
    model_config = ConfigDict(extra="ignore", frozen=True)


class EventUser(_Payload):
    login: str


class EventApp(_Payload):
    slug: str | None = None


class EventComment(_Payload):
    id: int
    body: str
    user: EventUser
    performed_via_github_app: EventApp | None = None  # null for a comment a person wrote


class EventPullRequestLink(_Payload):
    url: str


class EventIssue(_Payload):
    number: int
    body: str | None = None
    # Present on a pull request's conversation (a PR is an issue too); absent on an issue.
    pull_request: EventPullRequestLink | None = None


class EventRepository(_Payload):
    full_name: str
    default_branch: str = "main"


class IssueCommentEvent(_Payload):
    action: str
    comment: EventComment
    issue: EventIssue
    repository: EventRepository
    sender: EventUser

    @property
    def initiative(self) -> str | None:
        """The initiative the commented issue carries (its tracker marker)."""
        found = _INITIATIVE_MARKER.search(self.issue.body or "")
        return found.group(1) if found else None

    @property
    def on_pull_request(self) -> bool:
        return self.issue.pull_request is not None


class EventRef(_Payload):
    ref: str
    sha: str


class EventPullRequest(_Payload):
    number: int
    head: EventRef
    base: EventRef
    draft: bool = False


class PullRequestEvent(_Payload):
    action: str
    number: int
    pull_request: EventPullRequest
    repository: EventRepository
    sender: EventUser
    before: str | None = None  # synchronize: the head before the push
    after: str | None = None


class WorkflowDispatchEvent(_Payload):
    ref: str
    workflow: str
    inputs: dict[str, str | bool | int | float | None] | None = None
    repository: EventRepository
    sender: EventUser

    def input(self, name: str) -> str | None:
        value = (self.inputs or {}).get(name)
        return None if value is None else str(value)


Event = TypeVar("Event", IssueCommentEvent, PullRequestEvent, WorkflowDispatchEvent)
_NAMES = {IssueCommentEvent: "an issue_comment", PullRequestEvent: "a pull_request",
          WorkflowDispatchEvent: "a workflow_dispatch"}  # fmt: skip


def read_event(path: Path, kind: type[Event] = IssueCommentEvent) -> Event:  # type: ignore[assignment]
    """The event payload at `path`, read as `kind`; a clear error when it is not one."""
    try:
        return kind.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError([Problem(str(path), None, "no such event file")]) from None
    except ValidationError as error:
        raise InputError([Problem(str(path), None, f"not {_NAMES[kind]} event: {error}")]) from None
