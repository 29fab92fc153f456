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


def test_a_lane_hanging_past_its_limit_is_parked_once_not_lost(world: ActWorld) -> None:
    """GitHub cancels a lane job at its `timeout-minutes` (the world does, as act does not):
    the shipped limit leaves imm's own lane limit room to fire first, so the lane is parked
    with why, never counted lost and run again (three times the limit, for an agent, paid)."""
    world.behaviour["a"] = "hang"
    world.create({"a": [], "b": []}, "shop", config="lane_timeout_minutes: 1\n")
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()
    assert world.timed_out_jobs == []
    assert [sorted(j for j in run.jobs if j.startswith("imm lane")) for run in runs] == [
        ["imm lane a", "imm lane b"]
    ]
    children = {c["task_id"]: c for c in world.state()["children"]}
    a = children["a"]
    assert (a["state"], a["attempts"]) == ("needs_human", 0)
    assert a["reason"].startswith("executor timed out after 60 s")
    assert children["b"]["state"] == "integrated"
