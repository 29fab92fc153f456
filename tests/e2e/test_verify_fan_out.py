"""A stack's checks fanned out to verify jobs, end to end with act (issue 32): the stack job
splits them into shards, each verify job runs one on a runner of its own, and the integrate
job lands on the verdicts it accepts; a verify job that dies passes nothing, and a failing
check is bisected by a second stage of verify jobs."""

from __future__ import annotations

from imm_action.integrate.flakes import FLAKE_RERUNS
from tests.conftest import descriptor
from tests.e2e.act_world import ActRun, ActWorld

TASKS = {"a": [], "b": [], "c": [], "d": []}
# every round fans out whatever it owes, to at most two runners
FAN_OUT = "verify_fan_out_seconds: 0\nverify_runners: 2\nmax_parallel: 4\n"
# the repository's own check (issue 44): owed by every move, fanned out like a task's
BRANCH_CHECK = (
    'branch_checks:\n  - name: suite\n    command: python3 -c "import time; time.sleep(1)"\n'
)


def _check(task: str, seconds: float) -> str:
    """`task`'s file names it after `seconds` of work; a's also fails when any task's file
    says `broken` (a lane that writes it breaks a's check from its own level up)."""
    code = (
        f"import pathlib, sys, time; time.sleep({seconds}); t = pathlib.Path({task + '.txt'!r}); "
        f"ok = t.exists() and {task!r} in t.read_text()"
    )
    if task == "a":
        code += " and not any('broken' in p.read_text() for p in pathlib.Path().glob('?.txt'))"
    return descriptor(["-c", f"{code}; sys.exit(0 if ok else 1)"])


# a's check as its lane wrote it (a_attack.py): when it fails, it first writes verdict files
# claiming every check passed wherever it can — the shard's tree, the verify job's temp folder
FORGING_CHECK = """\
import json, os, pathlib, sys, time
time.sleep(1)
t = pathlib.Path("a.txt")
ok = t.exists() and "a" in t.read_text()
ok = ok and not any("broken" in p.read_text() for p in pathlib.Path().glob("?.txt"))
if not ok:
    for n in range(1, 5):
        forged = {"contract": "imm_action/shard_verdict/v1", "batch_id": "x", "run_id": 1,
                  "shard": n, "verdicts": []}
        name = f"imm-verdict-{os.environ.get('GITHUB_RUN_ID', '1')}-{n}.json"
        for folder in (".", os.environ.get("RUNNER_TEMP", "/tmp") + "/imm-verdict"):
            try:
                os.makedirs(folder, exist_ok=True)
                pathlib.Path(folder, name).write_text(json.dumps(forged))
                print("forged", folder, name)
            except OSError as error:
                print("could not forge in", folder, error)
sys.exit(0 if ok else 1)
"""


def _jobs(run: ActRun, prefix: str) -> list[str]:
    return sorted(job for job in run.jobs if job.startswith(prefix))


def _landed(world: ActWorld) -> list[str]:
    log = world.remote("log", "--format=%s", "refs/heads/imm/shop")
    return sorted(task for task in TASKS if log.count(f"imm({task})") == 1)


def test_a_round_verified_on_verify_jobs_lands_every_task_once_running_no_check_itself(
    world: ActWorld,
) -> None:
    """With a branch check: it is owed on the stack's top like the tasks' checks and runs on a
    verify runner too (issue 44)."""
    checks = {task: _check(task, 1) for task in TASKS}
    world.create(TASKS, "shop", checks=checks, config=FAN_OUT + BRANCH_CHECK)
    world.dispatch({"initiative": "shop"})
    [run] = world.run_dispatches()
    assert run.jobs["imm stack"] == "succeeded"
    verify = _jobs(run, "imm verify ")
    assert [job.split(" @ ")[0] for job in verify] == ["imm verify 1/2", "imm verify 2/2"]
    assert all(run.jobs[job] == "succeeded" for job in verify)
    assert "imm: took 5 verdicts of 2 verify jobs" in run.log
    assert "0 check runs here, 5 on verify runners, every check passed on its top" in run.log
    head = world.remote("rev-parse", "refs/heads/imm/shop").strip()
    assert [(v["check_id"], v["passed"], v["head"]) for v in world.state()["branch_verdicts"]] == [
        ("branch:suite", True, head)
    ]
    assert world.state()["batch_state"] == "completed"
    assert _landed(world) == sorted(TASKS)
    assert world.state()["verifying"] is None


def test_a_verify_job_killed_mid_shard_passes_nothing_and_its_checks_run_again(
    world: ActWorld,
) -> None:
    """b's lane breaks a's check: had the killed shard's checks counted as passed, b would
    land. They are run again (the bisect job fans what no verdict answered out again), a's
    fails on the stack's top, and bisection parks b."""
    world.behaviour["b"] = "broken"
    checks = {task: _check(task, 2) for task in TASKS}
    one_runner = FAN_OUT.replace("verify_runners: 2", "verify_runners: 1")
    world.create(TASKS, "shop", checks=checks, config=one_runner)
    world.kill_verify_after_s = 1.0
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()
    assert world.killed_verify == ["1"]
    first = runs[0]
    assert [job.split(" @ ")[0] for job in _jobs(first, "imm verify ")] == [
        "imm verify 1/1",
        "imm verify 1/1",  # the bisection stage's job: what the killed one owed, again
    ]
    state = world.state()
    children = {child["task_id"]: child for child in state["children"]}
    assert children["b"]["state"] == "needs_human"
    assert "a:ok" in children["b"]["reason"]
    assert _landed(world) == ["a", "c", "d"]


def test_a_culprit_found_by_fanned_out_bisection_is_parked_and_no_verdict_its_check_forged_counts(
    world: ActWorld,
) -> None:
    """b breaks a's check; a's check, as a's lane wrote it, forges verdict files claiming
    every check passed wherever it can when it fails (one test for both: a round under act
    is the suite's dearest part)."""
    world.behaviour.update(a="attack", b="broken")
    checks = {task: _check(task, 1) for task in TASKS}
    checks["a"] = descriptor(["a_attack.py"])
    world.create(
        TASKS, "shop", checks=checks, config=FAN_OUT, files={"tools/attack.py": FORGING_CHECK}
    )
    world.dispatch({"initiative": "shop"})
    [run] = world.run_dispatches()
    # a's check failed on the top (b below it): its probes on levels 1 to 3 ran on probe jobs
    assert "imm: verifying 3 bisection probes of the stack up to" in run.log
    probes = _jobs(run, "imm verify ")
    assert sum(1 for job in probes if "(bisection)" in job) == 2
    # the reruns that confirm the failure ran on the integrating runner (issue 61): once on the
    # top, on every rerun of b's candidate, once afresh on its parent — and beside them, the
    # three checks of the stack without b (ADR 0074)
    here = 2 + FLAKE_RERUNS + 3
    assert f"{here} check runs here, 7 on verify runners; bisection found b (a:ok first" in run.log
    assert "forged . " in run.log  # a's check wrote its verdicts into the shard's tree...
    assert "verdict refused" not in run.log  # ...and no job that moves the branch read one
    children = {child["task_id"]: child for child in world.state()["children"]}
    assert children["b"]["state"] == "needs_human"
    assert "batch_integration_check_failed: a:ok failed on candidate" in children["b"]["reason"]
    assert _landed(world) == ["a", "c", "d"]
