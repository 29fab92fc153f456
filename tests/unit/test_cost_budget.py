"""The cost budget (issue 45): what counts against `max_cost_usd`, and what admission does
once it is reached — known spend, the batches continued, and the lanes still at work."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.actions.summary import lane_summary
from imm_action.costs import batch_cost_line, cost_cell, money
from imm_action.integrate.decide import AdmissionRules, startable_children
from imm_action.integrate.spend import cost_budget_used, line_spend
from imm_action.lanes.local import LocalLanes, RunningLane, spend_file_of
from imm_action.model.outcome import OUTCOME_CONTRACT, LaneOutcome
from imm_action.model.spend import AgentRun, AgentSpend
from imm_action.model.state import BatchRunState, StateBudget
from tests.unit.test_decide import batch, pending


def _budgeted(
    limit: float | None, spent: float = 0.0, before: float | None = None
) -> BatchRunState:
    first = pending("a").model_copy(update={"spend": AgentSpend(cost_usd=spent, runs=1)})
    state = batch(first, pending("b"), pending("c"))
    budget = StateBudget(max_children=3, qa_failure_limit=2, max_cost_usd=limit)
    spent_before = AgentSpend(cost_usd=before, runs=1) if before is not None else None
    return state.model_copy(update={"budget": budget, "spent_before": spent_before})


WITHOUT_BUDGET = startable_children(_budgeted(None), AdmissionRules())


def test_below_the_budget_admission_goes_on_as_without_one() -> None:
    assert WITHOUT_BUDGET == ["a"]
    assert startable_children(_budgeted(1.0, spent=0.5), AdmissionRules()) == WITHOUT_BUDGET
    assert startable_children(_budgeted(None, spent=500.0), AdmissionRules()) == WITHOUT_BUDGET


def test_no_lane_starts_once_the_known_spend_reaches_the_budget() -> None:
    assert startable_children(_budgeted(1.0, spent=1.0), AdmissionRules()) == []


def test_what_lanes_at_work_spent_so_far_counts_before_a_lane_starts() -> None:
    state = _budgeted(1.0, spent=0.5)
    assert startable_children(state, AdmissionRules(in_flight_usd=0.49)) == WITHOUT_BUDGET
    assert startable_children(state, AdmissionRules(in_flight_usd=0.5)) == []


def test_what_the_continued_batches_spent_counts_on() -> None:
    state = _budgeted(1.0, spent=0.3, before=0.7)
    assert line_spend(state).cost_usd == pytest.approx(1.0)
    assert cost_budget_used(state)


def test_the_local_runner_sums_what_its_running_lanes_wrote_and_ignores_what_is_not_a_cost(
    tmp_path: Path,
) -> None:
    lanes = LocalLanes(own_pid=1)
    written = {"a": "0.25\n", "b": "0.5", "c": "nan", "d": "-4", "e": "x", "ended": "7"}
    for task, text in written.items():
        log = tmp_path / f"{task}.log"
        spend_file_of(log).write_text(text)
        process = _Process(0 if task == "ended" else None)  # its outcome counts it
        lanes.running[task] = RunningLane(task, process, log, 0.0)  # type: ignore[arg-type]
    lanes.running["f"] = RunningLane("f", _Process(None), tmp_path / "f.log", 0.0)  # type: ignore[arg-type]
    assert lanes.in_flight_usd() == pytest.approx(0.75)


class _Process:
    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_a_lanes_job_summary_says_what_each_agent_run_cost() -> None:
    outcome = LaneOutcome(
        contract=OUTCOME_CONTRACT, batch_id="batch-shop-1", task_id="cart", attempt=0,
        state="settled", reason=None, qa_failures=1, findings=[], lane_commit="a" * 40,
        agent_runs=[AgentRun(cost_usd=0.3, input_tokens=20_000, turns=9), AgentRun(turns=2)],
    )  # fmt: skip
    assert (
        "Agent: $0.30, 20 k tokens (1 run of unknown cost) over 2 runs "
        "($0.30, 20 k tokens, 9 turns; cost unknown, 2 turns)." in lane_summary(outcome)
    )


def test_cost_words() -> None:
    assert [money(0.0042), money(4.312), money(1234.5)] == ["$0.0042", "$4.31", "$1,234.50"]
    assert cost_cell(None) == "—"
    assert cost_cell(AgentSpend(runs=2, unknown=2)) == "unknown"
    assert cost_cell(AgentSpend(cost_usd=0.5, runs=2, unknown=1)) == "$0.50 + 1 unknown"
    assert batch_cost_line([("a", None)]) is None
    line = batch_cost_line(
        [("a", AgentSpend(cost_usd=0.5, runs=2, attempts=2, tokens=1_234_567)),
         ("b", AgentSpend(cost_usd=0.25, runs=1, attempts=1))],
        limit=1.0,
    )  # fmt: skip
    assert line == (
        "agents: 2 tasks, $0.75, 1.2 M tokens; the costliest: a $0.50 over 2 attempts; "
        "$0.25 left of max_cost_usd $1.00"
    )


def test_a_tasks_spend_is_summed_over_its_lanes_a_lost_ones_run_kept() -> None:
    """Issue 62 #7: a lane lost after its agent spent, then a second lane's outcome — the task
    spent both (had the second replaced the first, the lost lane's run would vanish)."""
    from imm_action.integrate import transitions as t

    state = _budgeted(None, spent=0.5)  # `a`'s first lane, lost after its agent's run
    state = t.spent(state, "a", AgentSpend(cost_usd=0.25, runs=1))
    spend = next(child for child in state.children if child.task_id == "a").spend
    assert spend is not None
    assert spend.cost_usd == pytest.approx(0.75)
    assert spend.runs == 2
