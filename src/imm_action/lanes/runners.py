"""Lane runners behind one protocol (SPEC §5.2 step 4): where lanes run, and what became of
each lane's runner. Two implementations: local processes (`imm_action.lanes.local`) and GitHub
Actions matrix jobs (`imm_action.lanes.github`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from imm_action.model.state import Runner


@dataclass(frozen=True)
class JobFound:
    """The GitHub job that carries a lane attempt, once it is known (recorded in the state)."""

    job_id: int
    name: str
    url: str


@dataclass(frozen=True)
class Running:
    """Still at work, or not started yet: wait for it."""

    job: JobFound | None = None


@dataclass(frozen=True)
class FinishedWithOutcome:
    """Ended, and its outcome is published."""

    job: JobFound | None = None


@dataclass(frozen=True)
class FinishedWithoutOutcome:
    """Ended (or will never start) without an outcome: the lane was lost. `conclusion` says how
    (a GitHub job conclusion, "queued for more than 30 min", "exited"); `url` names the job."""

    conclusion: str
    url: str | None = None
    job: JobFound | None = None


@dataclass(frozen=True)
class Orphaned:
    """Its coordinator died (SIGKILL of `imm run`): start it again, not counted as an attempt."""


RunnerReport = Running | FinishedWithOutcome | FinishedWithoutOutcome | Orphaned


@dataclass(frozen=True)
class LaneAtWork:
    """A lane the pass waits for: what the state recorded about its runner, and whether an
    outcome for this attempt is published."""

    task_id: str
    runner: Runner
    has_outcome: bool


@dataclass(frozen=True)
class LaneStart:
    batch_id: str
    task_id: str
    runner: Runner


class LaneRunners(Protocol):
    """Where lanes run. `runner_for` is what a pass records when it admits a lane; `start`
    starts admitted lanes that this runner owns (on GitHub the workflow's matrix starts them);
    `reports` tells, for all lanes at once, what became of each one's runner."""

    def runner_for(self, task_id: str) -> Runner: ...

    def start(self, lanes: Sequence[LaneStart]) -> None: ...

    def reports(self, lanes: Sequence[LaneAtWork]) -> Mapping[str, RunnerReport]: ...
