"""The `issue_comment` event payload, read from `$GITHUB_EVENT_PATH` — the only way comment
text reaches the program (never through a workflow expression)."""

from __future__ import annotations

import re
from pathlib import Path

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


class EventComment(_Payload):
    id: int
    body: str
    user: EventUser


class EventIssue(_Payload):
    number: int
    body: str | None = None
    pull_request: dict[str, object] | None = None


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


def read_event(path: Path) -> IssueCommentEvent:
    try:
        return IssueCommentEvent.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError([Problem(str(path), None, "no such event file")]) from None
    except ValidationError as error:
        raise InputError(
            [Problem(str(path), None, f"not an issue_comment event: {error}")]
        ) from None
