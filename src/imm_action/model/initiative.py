"""What a carrier observed of an initiative, and where each piece came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from imm_action.model.common import Identifier, StrictModel

LOCAL_OBSERVATION_CONTRACT = "immune_brain/local_initiative_observation/v1"


class LocalCarrier(StrictModel):
    kind: Literal["local"] = "local"
    path: str

    @property
    def issue(self) -> int | None:
        """The issue that carries the initiative: none for a file."""
        return None


class GithubCarrier(StrictModel):
    kind: Literal["github"] = "github"
    issue_number: Annotated[int, Field(ge=1)]

    @property
    def issue(self) -> int | None:
        """The issue that carries the initiative (reports go there; reads start there)."""
        return self.issue_number


Carrier = Annotated[LocalCarrier | GithubCarrier, Field(discriminator="kind")]


class InitiativeTask(StrictModel):
    task_id: Identifier
    slice_id: Identifier
    blocked_by: list[Identifier]


class LocalInitiativeObservation(StrictModel):
    """immune-brain's `local_initiative_observation/v1`, after normalisation (tasks sorted)."""

    contract: Literal["immune_brain/local_initiative_observation/v1"]
    initiative_id: Identifier
    path: str
    tasks: list[InitiativeTask]


@dataclass(frozen=True)
class Initiative:
    """A normalised initiative: ids checked, dependencies known, tasks sorted by task_id."""

    slug: str
    carrier: Carrier
    tasks: tuple[InitiativeTask, ...]
