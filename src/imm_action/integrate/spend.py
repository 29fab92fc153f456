"""Pure: what a batch's agents spent, and whether its cost budget still admits a lane (issue
45, decision 0062).

The budget counts what is known: every lane outcome's reported runs (retries, parked and lost
attempts included), what the batches it continues spent, and — where the runner can see them
(`imm run`) — the runs of lanes still at work. A run that reported no cost counts as nothing
and is shown as unknown: the budget stops admission in time only for agents that report."""

from __future__ import annotations

from imm_action.costs import batch_cost_line
from imm_action.model.spend import NO_SPEND, AgentSpend, summed
from imm_action.model.state import BatchRunState


def batch_spend(state: BatchRunState) -> AgentSpend:
    """This batch's spend: every child's, summed."""
    return summed(child.spend for child in state.children)


def line_spend(state: BatchRunState) -> AgentSpend:
    """This batch's spend and what the batches it continues spent."""
    return batch_spend(state).plus(state.spent_before or NO_SPEND)


def cost_budget_used(state: BatchRunState, in_flight_usd: float = 0.0) -> bool:
    """Has the known spend, with the lanes in flight's runs so far, reached the budget?"""
    limit = state.budget.max_cost_usd
    return limit is not None and line_spend(state).cost_usd + in_flight_usd >= limit


def cost_line(state: BatchRunState) -> str | None:
    """The batch's cost line as every view says it (None: no agent reported anything)."""
    spent = [(child.task_id, child.spend) for child in state.children]
    return batch_cost_line(spent, state.spent_before, state.budget.max_cost_usd)
