"""A workflow run cancelled mid-round stops the batch; a later dispatch goes on with what did
not finish, end to end with act (issue 31)."""

from __future__ import annotations

from tests.e2e.act_world import REPO, ActWorld

# Six lanes at once, two of which finish before the run ends: the scenario of twelve and four
# (issue 31) at half the act jobs (issue 46: a round under act is the suite's dearest part).
TASKS = {f"t{index:02d}": [] for index in range(6)}
FINISHED = ["t00", "t01"]


def _lanes(run_jobs: dict[str, str]) -> list[str]:
    return sorted(job.removeprefix("imm lane ") for job in run_jobs if job.startswith("imm lane"))


def test_a_cancelled_run_stops_the_batch_and_the_next_dispatch_runs_only_what_did_not_finish(
    world: ActWorld,
) -> None:
    for task in TASKS:
        if task not in FINISHED:
            world.behaviour[task] = "hang"  # still working when the run is cancelled
    world.create(TASKS, "shop", local=False)
    issue = world.tracker("shop", TASKS)
    world.cancel_after_lanes = len(FINISHED)
    world.dispatch({"initiative": f"#{issue}", "max_parallel": "6"})
    cancelled = world.run_dispatch()
    assert "integrate" in cancelled.jobs  # run after the cancel, as GitHub runs `always()` jobs
    assert "imm: lane t02's job was cancelled with workflow run" in cancelled.log
    repo = world.github.repo(REPO)
    assert len(repo.dispatches) == 1  # the cancelled run dispatched no next round
    state = world.state()
    assert state["batch_state"] == "cancelled"
    why = f"batch_run_cancelled: workflow run {cancelled.run_id} was cancelled"
    assert state["stop_reason"] == why
    children = {c["task_id"]: c for c in state["children"]}
    assert sorted(t for t, c in children.items() if c["state"] == "integrated") == FINISHED
    assert all(c["attempts"] == 0 for c in children.values())  # none counted lost
    [status] = [
        c["body"] for c in repo.comments.values() if "<!-- imm-status:shop -->" in c["body"]
    ]
    assert why in status
    assert "in flight" not in status
    checks = [r for r in repo.check_runs.values() if r["name"] == "imm: shop"]
    assert [r["conclusion"] for r in checks if r["status"] != "completed"] == []
    assert checks[-1]["conclusion"] == "cancelled"

    world.cancel_after_lanes = None
    world.behaviour.clear()
    world.dispatch({"initiative": f"#{issue}"})  # a person goes on with the batch
    runs = world.run_dispatches()
    ran = sorted(task for run in runs for task in _lanes(run.jobs))  # rounds of max_parallel 4
    assert ran == sorted(set(TASKS) - set(FINISHED))
    final = world.state()
    assert final["batch_state"] == "completed"
    lanes_run = world.remote("log", "--format=%s", "refs/heads/imm/shop").count("imm(")
    assert lanes_run == len(TASKS)  # every task landed once


def test_bundles_a_dead_run_never_imported_are_taken_from_its_artifacts_not_run_again(
    world: ActWorld,
) -> None:
    """The run dies before its integrate job (force-cancelled): the next dispatch imports the
    finished lanes' bundles from that run's artifacts and runs only the others."""
    for task in TASKS:
        if task not in FINISHED:
            world.behaviour[task] = "hang"
    world.create(TASKS, "shop")
    world.kill_run_after_lanes = len(FINISHED)
    world.dispatch({"initiative": "shop", "max_parallel": "6"})
    died = world.run_dispatch()
    assert "integrate" not in died.jobs
    assert len(world.github.repo(REPO).dispatches) == 1

    world.kill_run_after_lanes = None
    world.behaviour.clear()
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()
    for task in FINISHED:
        assert f"({task}): imported: its outcome of attempt 0 (settled) is pushed" in runs[0].log
    ran = sorted(task for run in runs for task in _lanes(run.jobs))
    assert ran == sorted(set(TASKS) - set(FINISHED))
    final = world.state()
    assert final["batch_state"] == "completed"
    assert all(c["attempts"] == 0 for c in final["children"])
