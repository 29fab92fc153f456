"""imm-batch.yml end to end with act: plan → lanes → integrate → continuations, as shipped."""

from __future__ import annotations

import base64

from tests.e2e.act_world import REPO, TOKEN, ActWorld

FIVE = {"a": [], "b": [], "c": ["a"], "d": ["b"], "e": ["c", "d"]}


def _integrated(world: ActWorld, slug: str) -> list[str]:
    subjects = world.remote("log", "--format=%s", f"refs/heads/imm/{slug}").splitlines()
    return sorted(line.split(":")[0][4:-1] for line in subjects if line.startswith("imm("))


def _checks(world: ActWorld, slug: str) -> list[dict[str, object]]:
    runs = world.github.repo(REPO).check_runs.values()
    return [run for run in runs if run["name"] == f"imm: {slug}"]


def _assert_no_executor_saw_the_token(world: ActWorld, lanes: int) -> None:
    environments = list(world.executor_environments())
    assert len(environments) >= lanes
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    for environment in environments:
        leaks = [k for k, v in environment.items() if TOKEN in v or basic in v]
        assert leaks == []
        assert not [k for k in environment if "TOKEN" in k or k.startswith("GIT_CONFIG_")]


def test_a_dispatched_batch_of_an_issue_runs_round_after_round_to_completion_reporting_on_it(
    world: ActWorld,
) -> None:
    """Five tasks in three rounds, the initiative carried by an issue: each round dispatches
    the next, no check run is left pending, the issue holds one status comment, and no
    executor sees the token (one world for the three: a round under act is the suite's
    dearest part, issue 46)."""
    world.create(FIVE, "shop", local=False)
    issue = world.tracker("shop", FIVE)
    world.behaviour.update(dict.fromkeys(FIVE, "costs"))  # each lane's agent reports 25 cents
    world.dispatch({"initiative": f"#{issue}", "max_parallel": "2"})
    runs = world.run_dispatches()
    assert [run.exit_code for run in runs] == [0, 0, 0], runs[-1].log[-3000:]
    # each next round was asked for by the stack job, as soon as its tasks could start, and
    # the integrate job, told so, asked for none (ADR 0075)
    assert "dispatched the next round for c, d: its lanes run while" in runs[0].log
    assert "dispatched the next round for e: its lanes run while" in runs[1].log
    # the integrate job's summary (act prints it) sums what every lane's outcome carried
    assert "**Cost:** agents: 5 tasks, $1.25, 6.0 k tokens\n" in runs[-1].log
    assert "Agent: $0.25, 1.2 k tokens over 1 run ($0.25, 1.2 k tokens, 4 turns)." in runs[0].log
    assert [sorted(j for j in run.jobs if j.startswith("imm lane")) for run in runs] == [
        ["imm lane a", "imm lane b"], ["imm lane c", "imm lane d"], ["imm lane e"]
    ]  # fmt: skip
    assert _integrated(world, "shop") == sorted(FIVE)
    assert world.state()["batch_state"] == "completed"
    repo = world.github.repo(REPO)
    # every round is dispatched with the initiative as given: one concurrency group throughout
    assert {d["inputs"]["initiative"] for d in repo.dispatches} == {f"#{issue}"}
    status = [c for c in repo.comments.values() if "<!-- imm-status:shop -->" in c["body"]]
    assert len(status) == 1
    assert status[0]["issue_url"].endswith(f"/issues/{issue}")
    assert "is completed" in status[0]["body"]
    assert "default `GITHUB_TOKEN`" in status[0]["body"]
    head = world.remote("rev-parse", "refs/heads/imm/shop").strip()
    assert [(c["head_sha"], c["conclusion"]) for c in _checks(world, "shop")][-1] == (
        head,
        "success",
    )
    # every round's check run ended, the plan job's on main's head included: none pending
    going = [
        (c["head_sha"], c["status"]) for c in _checks(world, "shop") if c["status"] != "completed"
    ]
    assert going == []
    assert len(repo.pulls) == 1
    _assert_no_executor_saw_the_token(world, lanes=len(FIVE))


def test_a_run_replaced_while_pending_loses_nothing(world: ActWorld) -> None:
    world.create({"a": [], "b": ["a"]}, "chain")
    world.dispatch({"initiative": "chain"})
    first = world.run_dispatch()
    assert first.exit_code == 0, first.log[-3000:]
    # The continuation it dispatched is still pending when someone starts the batch again:
    # GitHub cancels the pending run of the concurrency group in favour of the newer one.
    world.dispatch({"initiative": "chain"})
    world.replace_pending_run()
    world.run_dispatches()
    assert world.state()["batch_state"] == "completed"
    assert _integrated(world, "chain") == ["a", "b"]
