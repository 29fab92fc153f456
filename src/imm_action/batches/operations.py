"""What `/imm status|plan|retry|cancel` do to the batch in this checkout, as reply text."""

from __future__ import annotations

import io as text_io
from dataclasses import dataclass
from pathlib import Path

from imm_action.batches.decisions import DecisionArgs, apply_decision, retry_decision
from imm_action.batches.repo import open_batch_repo
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO
from imm_action.errors import ImmError
from imm_action.github.reporting import fitted
from imm_action.integrate import transitions
from imm_action.integrate.store import StateStore
from imm_action.model.state import BatchRunState
from imm_action.passes.gate import gate_markdown
from imm_action.render import batch_markdown
from imm_action.render.plan import plan_markdown
from imm_action.workspace import plan_initiative


@dataclass(frozen=True)
class RepoBatchOperations:
    repo: Path
    remote: str | None
    path_env: str
    initiatives: InitiativeSource

    def status(self, slug: str) -> str:
        batch_repo = open_batch_repo(self.repo, self.remote, self.initiatives)
        batch_repo.refs.refresh()
        store = StateStore(batch_repo.refs)
        batches = store.batches_of(slug)
        stored = store.active(slug) or (batches[-1] if batches else None)
        if stored is None or stored.report is None:
            return f"`{slug}` has no batch yet. Start one with `/imm run`."
        state = stored.state
        return fitted(stored.report, lambda shown: batch_markdown(shown, state))

    def plan(self, slug: str, issue: int | None = None) -> str:
        batch_repo = open_batch_repo(self.repo, self.remote, self.initiatives)
        try:
            plan, _ = plan_initiative(
                batch_repo.root, slug, batch_repo.config, initiatives=self.initiatives, issue=issue
            )
        except ImmError as error:
            return f"The plan of `{slug}` cannot be made:\n\n```\n{error}\n```"
        return plan_markdown(plan, gate_markdown(slug, batch_repo.config))

    def active(self, slug: str) -> BatchRunState | None:
        """The initiative's active batch as the remote holds it now."""
        batch_repo = open_batch_repo(self.repo, self.remote, self.initiatives)
        batch_repo.refs.refresh()
        stored = StateStore(batch_repo.refs).active(slug)
        return None if stored is None else stored.state

    def retry(self, slug: str, task_id: str) -> str:
        return self._decide(slug, f"retry {task_id}", retry_decision(task_id), task_id)

    def cancel(self, slug: str) -> str:
        return self._decide(slug, "cancel", transitions.cancel)

    def _decide(
        self, slug: str, what: str, decision: transitions.Decision, retry: str | None = None
    ) -> str:
        sink = text_io.StringIO()
        args = DecisionArgs(slug, self.repo, None, self.remote, self.path_env)
        try:
            apply_decision(args, decision, CommandIO(sink, sink), self.initiatives, retry)
        except ImmError as error:
            return f"`{what}` was refused: {error}"
        return f"Done: `{what}`.\n\n```\n{sink.getvalue().strip()}\n```"
