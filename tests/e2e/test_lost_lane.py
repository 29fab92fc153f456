"""A lane job killed mid-run publishes nothing; the next pass re-admits the lane, end to end."""

from __future__ import annotations

from tests.e2e.act_world import ActWorld


def test_a_lane_job_killed_mid_run_is_re_admitted_and_the_batch_still_completes(
    world: ActWorld,
) -> None:
    world.behaviour["a"] = "kill_once"
    world.create({"a": [], "b": []}, "shop")
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()
    assert runs[0].jobs["imm lane a"] == "failed"
    assert [sorted(j for j in run.jobs if j.startswith("imm lane")) for run in runs] == [
        ["imm lane a", "imm lane b"], ["imm lane a"]
    ]  # fmt: skip
    state = world.state()
    assert state["batch_state"] == "completed"
    children = {c["task_id"]: c for c in state["children"]}
    assert (children["a"]["state"], children["a"]["attempts"]) == ("integrated", 1)  # 1 lost
