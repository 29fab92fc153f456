"""Batch run report `imm_action/batch_run_report/v1` (SPEC §4.7)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from imm_action.model.common import GitOid, Identifier, StrictModel, Timestamp
from imm_action.model.outcome import Failure
from imm_action.model.spend import AgentSpend
from imm_action.model.state import BatchState, ChildState, Continuation

REPORT_CONTRACT: Final = "imm_action/batch_run_report/v1"


class ReportChild(StrictModel):
    task_id: Identifier
    state: ChildState
    reason: str | None
    commit: GitOid | None
    lane_branch: str | None
    attempts: Annotated[int, Field(ge=0)]
    qa_failures: Annotated[int, Field(ge=0)]
    failures: list[Failure] = Field(default_factory=list)  # the failed commands behind `reason`
    # what its agent runs cost in this batch, every attempt summed (issue 45); None: none ended
    spend: AgentSpend | None = None
    # parked: the failing tests, when all lie outside its scope (issue 62 #3: no retry as it
    # is can pass them, so none is offered)
    failing_outside_scope: list[str] | None = None


class BatchRunReport(StrictModel):
    contract: Literal["imm_action/batch_run_report/v1"]
    batch_id: Identifier
    initiative_slug: Identifier
    batch_state: BatchState
    max_parallel: Annotated[int, Field(ge=1)]
    children: list[ReportChild]
    commits: list[GitOid]
    reason: str
    next_action: str
    lanes_started: Annotated[int, Field(ge=0)]
    created_at: Timestamp
    continues: Continuation | None = None
    # every push a person made on the batch branch that the batch adopted, as
    # "adopted: <sha> (pushed outside imm, unverified)": a move adopted while no lane ran
    adopted: list[str] = Field(default_factory=list)
    # every push onto the batch branch the batch refused and kept aside, as "quarantined: <sha>
    # ... is kept as <ref> ...", with how to bring it in (issue 42 #4)
    quarantined: list[str] = Field(default_factory=list)
    # "lane code ran unconfined: <why>", once per cause (issue 43 #6)
    unconfined: list[str] = Field(default_factory=list)
    # "branch check branch:suite: passed on imm/x at <commit>", one per branch check (issue 44)
    branch_checks: list[str] = Field(default_factory=list)
    # The branch checks that failed on the batch head, each with its command, how it ended and
    # its last lines (issue 44: a red base), shown as a task's failed checks are.
    branch_failures: list[Failure] = Field(default_factory=list)
    # What the batch's agents spent, every task's runs summed (issue 45), and the same as a
    # line: "agents: 12 tasks, $4.31, 1.2 M tokens; the costliest: b $0.92 over 2 attempts".
    # None: no agent run ended yet.
    spend: AgentSpend | None = None
    cost: str | None = None
    # "t1 retired tests/test_old.py::test_a, …": the tests each landed task's intent retired
    # (`retires_tests`, issue 58), no longer owed by the branch
    retired: list[str] = Field(default_factory=list)
    # "flaky test tests/t.py::test_io: flipped 2 times in this batch; no lane was blamed for it":
    # the tests seen to fail on a tree and pass there (issue 61), the most flips first
    flaky: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _every_unfinished_child_says_why(self) -> BatchRunReport:
        silent = [c.task_id for c in self.children if not c.state.done and not c.reason]
        if silent:
            raise ValueError(f"children without a reason: {', '.join(silent)}")
        return self
