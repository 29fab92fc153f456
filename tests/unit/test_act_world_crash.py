"""The act world tells act's own crash apart from imm's failures (ADR 0064, fifth turn)."""

from __future__ import annotations

import pytest

from tests.e2e.act_world import act_crash


@pytest.mark.parametrize(
    "race", ["map read and map write", "map writes", "map iteration and map write"]
)
def test_acts_death_of_its_map_race_is_named_as_acts_not_imms(race: str) -> None:
    found = act_crash(
        "[imm-batch/imm verify 2/2 @ 9dc357204b70-2] ⭐ Run Set up job\n"
        f"fatal error: concurrent {race}\n\ngoroutine 313114 [running]:\n"
    )
    assert found is not None
    assert "nektos/act#6055" in found


def test_a_run_failing_a_step_is_not_taken_for_acts_crash() -> None:
    failed = "[imm-batch/plan]   ❌  Failure - Main imm plan\nError: Job 'plan' failed\n"
    assert act_crash(failed) is None
