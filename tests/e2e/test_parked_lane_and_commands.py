"""A lane that fails its checks, and the /imm commands around it, end to end with act."""

from __future__ import annotations

from tests.e2e.act_world import REPO, ActWorld

TASKS = {"a": [], "b": ["a"], "c": []}


def _status_comment(world: ActWorld, slug: str) -> str:
    repo = world.github.repo(REPO)
    found = [
        c["body"] for c in repo.comments.values() if f"<!-- imm-status:{slug} -->" in c["body"]
    ]
    assert len(found) == 1
    return found[0]


def _replies(world: ActWorld) -> list[str]:
    repo = world.github.repo(REPO)
    return [c["body"] for c in repo.comments.values() if "<!-- imm-reply:" in c["body"]]


def test_imm_commands_from_comments_run_retry_and_cancel_a_batch_and_refuse_readers(
    world: ActWorld,
) -> None:
    world.behaviour["a"] = "fail"
    world.create(TASKS, "shop", local=False)
    issue = world.tracker("shop", TASKS)

    refused = world.comment(issue, "/imm run", "reader")
    assert refused.exit_code == 0, refused.log[-3000:]
    assert world.github.repo(REPO).dispatches == []
    assert "Nothing was run" in _replies(world)[-1]

    world.comment(issue, "/imm run --max-parallel 2", "writer")
    dispatched = world.github.repo(REPO).dispatches
    assert [d["inputs"] for d in dispatched] == [{"initiative": "shop", "max_parallel": "2"}]
    world.run_dispatches()
    assert world.state()["batch_state"] == "needs_human"

    world.comment(issue, "/imm retry a", "writer")
    children = {c["task_id"]: c["state"] for c in world.state()["children"]}
    assert (children["a"], children["b"]) == ("pending", "pending")

    world.comment(issue, "/imm cancel", "writer")
    assert world.state()["batch_state"] == "cancelled"


def test_a_lane_failing_its_checks_twice_is_parked_and_a_retry_alone_completes_the_batch(
    world: ActWorld,
) -> None:
    """a fails its checks twice: parked, its dependent skipped, the rest integrated, and the
    reports say why; then `/imm retry a` alone starts a run and the batch completes (one
    world for both: a round under act is the suite's dearest part, issue 46)."""
    world.behaviour["a"] = "fail"
    world.create(TASKS, "shop", local=False)
    issue = world.tracker("shop", TASKS)
    world.dispatch({"initiative": f"#{issue}", "max_parallel": "2"})
    runs = world.run_dispatches()
    assert len(runs) == 1
    assert runs[0].jobs["imm lane a"] == "failed"
    assert runs[0].jobs["imm lane c"] == "succeeded"
    children = {c["task_id"]: c for c in world.state()["children"]}
    assert (children["a"]["state"], children["a"]["reason"]) == (
        "needs_human",
        "QA failure limit reached",
    )
    assert children["a"]["qa_failures"] == 2
    assert children["b"]["state"] == "skipped_blocked"
    assert children["c"]["state"] == "integrated"
    assert world.state()["batch_state"] == "needs_human"
    comment = _status_comment(world, "shop")
    assert "is needs_human" in comment
    assert "QA failure limit reached" in comment
    assert "exited with 1" in comment  # the failing check, as it ran and ended
    assert "**Next:**" in comment
    checks = [r for r in world.github.repo(REPO).check_runs.values() if r["name"] == "imm: shop"]
    assert checks[-1]["conclusion"] == "action_required"
    assert "QA failure limit reached" in checks[-1]["output"]["title"]
    assert "exited with 1" in checks[-1]["output"]["summary"]
    assert "a:ok" in runs[0].log  # the failing check is shown in the lane job's log too

    world.behaviour["a"] = "ok"  # the person fixed what made `a` fail
    world.comment(issue, "/imm retry a", "writer")
    assert "No run was going: started [run " in _replies(world)[-1]
    runs = world.run_dispatches()
    assert runs, "the retry started no run"
    assert world.state()["batch_state"] == "completed"
