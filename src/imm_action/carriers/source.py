"""Initiative sources behind one protocol (SPEC §4.4). The composition root chooses them once —
local files, then the repository's GitHub issues when the environment names a repository and a
token — and every command path reads an initiative through `InitiativeSource.read`. Nothing
outside this package asks which kind of carrier an initiative has."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from imm_action.carriers.committed import UNCOMMITTED_NOTE, committed_inputs
from imm_action.carriers.github import issue_reference
from imm_action.carriers.local import has_local_initiative, initiative_path, read_local_initiative
from imm_action.carriers.observed import LocatedInitiative
from imm_action.errors import UsageError
from imm_action.model.initiative import Carrier, LocalCarrier


class InitiativeSource(Protocol):
    def read(self, slug: str, issue: int | None = None) -> LocatedInitiative:
        """The initiative `slug`. `issue` is the number of the issue that carries it, when the
        caller knows it (the event's issue, the batch state): a source kept in issues reads it
        directly instead of looking for it."""
        ...

    def slug_of(self, reference: str) -> str:
        """The slug an `initiative` input names: a slug as it is, or `#123`, the issue carrying
        the initiative."""
        ...

    def task_issues(self, slug: str) -> dict[str, int]:
        """Task id -> the issue that carries it (empty when tasks are not issues)."""
        ...


@dataclass(frozen=True)
class NoIssueSource:
    """No GitHub repository is configured: initiatives exist only as files."""

    def read(self, slug: str, issue: int | None = None) -> LocatedInitiative:
        raise UsageError(
            f"initiative {slug!r}: {initiative_path(slug)} does not exist, and no GitHub "
            "repository is configured to look in (set GITHUB_REPOSITORY and GITHUB_TOKEN)"
        )

    def slug_of(self, reference: str) -> str:
        if issue_reference(reference) is not None:
            raise UsageError(
                f"initiative {reference!r} names an issue, and no GitHub repository is "
                "configured to look in (set GITHUB_REPOSITORY and GITHUB_TOKEN)"
            )
        return reference

    def task_issues(self, slug: str) -> dict[str, int]:
        return {}


@dataclass(frozen=True)
class Initiatives:
    """SPEC §4.4 lookup order: `docs/initiatives/<slug>.md` as committed in `repo` (at `commit`,
    default HEAD; never the working tree) if it exists, else the issue source (GitHub, or none)."""

    repo: Path
    issues: InitiativeSource
    commit: str | None = None

    def read(self, slug: str, issue: int | None = None) -> LocatedInitiative:
        inputs = committed_inputs(self.repo, self.commit)
        if has_local_initiative(inputs, slug):
            return read_local_initiative(inputs, slug)
        if inputs.in_working_tree(initiative_path(slug)):
            raise UsageError(
                f"initiative {slug!r}: {initiative_path(slug)} is not committed "
                f"({UNCOMMITTED_NOTE})"
            )
        return self.issues.read(slug, issue)

    def slug_of(self, reference: str) -> str:
        return self.issues.slug_of(reference)

    def task_issues(self, slug: str) -> dict[str, int]:
        if has_local_initiative(committed_inputs(self.repo, self.commit), slug):
            return {}
        return self.issues.task_issues(slug)


def initiatives_at(source: InitiativeSource, commit: str) -> InitiativeSource:
    """`source` reading files as committed at `commit` (a source of issues has no files)."""
    return replace(source, commit=commit) if isinstance(source, Initiatives) else source


def carrier_file(carrier: Carrier) -> str | None:
    """The repository file that carries an initiative, when a file does (not an issue)."""
    return carrier.path if isinstance(carrier, LocalCarrier) else None
