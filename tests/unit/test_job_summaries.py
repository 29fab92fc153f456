"""Job summaries: a lane job says how its lane ended and shows each failing check's output."""

from __future__ import annotations

from imm_action.actions.summary import lane_summary
from imm_action.model.outcome import OUTCOME_CONTRACT, CheckResult, Failure, LaneOutcome
from tests.conftest import assert_golden


def _check(check_id: str, passed: bool, tail: str) -> CheckResult:
    return CheckResult(
        check_id=check_id, passed=passed, exit_code=0 if passed else 1, duration_ms=12,
        timed_out=False, output_limited=False, changed_outside=[], output_tail=tail,
    )  # fmt: skip


def test_a_parked_lanes_summary_says_why_and_shows_the_failing_output() -> None:
    outcome = LaneOutcome(
        contract=OUTCOME_CONTRACT, batch_id="batch-shop-1", task_id="cart", attempt=0,
        state="needs_human", reason="QA failure limit reached", qa_failures=2,
        findings=[_check("cart:ok", True, "fine"),
                  _check("cart:total", False, "expected 3\n``` got 4")],
        lane_commit=None,
        failures=[Failure(step="cart:total", command="python3 -m pytest -q tests/test_cart.py",
                          exit_code=1, output_tail="expected 3\ngot 4")],
    )  # fmt: skip
    assert_golden("lane_summary_parked.md", lane_summary(outcome))


def test_a_settled_lanes_summary_names_its_commit() -> None:
    outcome = LaneOutcome(
        contract=OUTCOME_CONTRACT, batch_id="batch-shop-1", task_id="cart", attempt=0,
        state="settled", reason=None, qa_failures=0, findings=[], lane_commit="a" * 40,
    )  # fmt: skip
    text = lane_summary(outcome)
    assert text.startswith("## imm lane `cart`: settled\n")
    assert f"Lane commit `{'a' * 40}`." in text
