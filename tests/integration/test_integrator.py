"""The guarded integrator on real repositories: clean path, guards, lineage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imm_action.errors import UsageError
from imm_action.integrate.flakes import FLAKE_RERUNS
from imm_action.integrate.store import StateStore
from imm_action.render import next_commands
from tests.batch_helpers import (
    branch_log,
    current,
    file_check,
    head_of,
    lane_of,
    make_lane_commit,
    make_project,
    open_local,
    publish,
    run_pass,
    work,
)
from tests.conftest import descriptor, git, run_cli

THREE = {"a": [], "b": [], "c": []}


def states(repo: Path) -> dict[str, str]:
    return {c.task_id: str(c.state) for c in current(repo).state.children}


def reasons(repo: Path) -> dict[str, str | None]:
    return {c.task_id: c.reason for c in current(repo).state.children}


def test_a_first_pass_starts_the_batch_and_admits_the_startable_lanes(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    result = run_pass(repo)
    assert result.admitted == ("a",)
    assert states(repo) == {"a": "lane_admitted", "b": "pending"}
    assert head_of(repo, "imm/init") == head_of(repo, "main")
    assert current(repo).state.batch_state == "running"


def test_lanes_from_the_same_base_integrate_one_after_another(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", THREE)
    run_pass(repo)
    lanes = {task: work(repo, task, goal=f"Make {task}") for task in THREE}
    result = run_pass(repo)
    assert result.integrated == ("a", "b", "c")
    stored = current(repo)
    assert stored.state.batch_state == "completed"
    history = branch_log(repo)[:3][::-1]
    assert stored.state.commits == history
    assert history[0] == lanes["a"]  # built on the lane base itself: the lane commit lands as is
    for task, commit in zip(THREE, history, strict=True):
        message = git(repo, "log", "-1", "--format=%B", commit)
        assert message.startswith(f"imm({task}): Make {task}\n")
        assert f"Immune-Brain-Batch: {stored.state.batch_id}" in message
        assert (
            git(repo, "log", "-1", "--format=%an <%ae>", commit).strip()
            == "Lane Author <lane@example.com>"
        )
    assert git(repo, "show", "imm/init:c.txt") == "c\n"


def test_a_lane_commit_with_two_parents_is_refused_and_nothing_moves(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    batch_id, base = lane_of(repo, "a")
    other = make_lane_commit(repo, base, "x", {"x.txt": "x"}, batch_id=batch_id)
    merge = make_lane_commit(
        repo, base, "a", {"a.txt": "a\n"}, batch_id=batch_id, parents=[base, other]
    )
    publish(repo, "a", merge)
    run_pass(repo)
    assert states(repo) == {"a": "needs_human"}
    assert reasons(repo)["a"].startswith("batch_head_lineage_broken: lane commit")  # type: ignore[union-attr]
    assert head_of(repo, "imm/init") == base


def test_a_lane_commit_not_on_its_lane_base_is_refused(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    batch_id, base = lane_of(repo, "a")
    elsewhere = make_lane_commit(repo, base, "x", {"x.txt": "x"}, batch_id=batch_id)
    stray = make_lane_commit(repo, elsewhere, "a", {"a.txt": "a\n"}, batch_id=batch_id)
    publish(repo, "a", stray)
    run_pass(repo)
    assert "batch_head_lineage_broken" in (reasons(repo)["a"] or "")
    assert head_of(repo, "imm/init") == base


def test_a_push_on_the_batch_branch_while_a_lane_runs_is_kept_aside_and_the_lane_lands(
    tmp_path: Path,
) -> None:
    # A lane's executor can write the user's repository: a move it could have made is never
    # adopted (issue 21 #2); it is kept aside and the batch goes on (issue 42 #4).
    repo = make_project(tmp_path / "r", {"a": []}, scopes={"a": ["a.txt", "shared.txt"]})
    run_pass(repo)
    head = head_of(repo, "imm/init")
    pushed = make_lane_commit(repo, head, "x", {"shared.txt": "from a person\n"}, batch_id="y")
    git(repo, "update-ref", "refs/heads/imm/init", pushed, head)
    work(repo, "a", {"a.txt": "a\n", "shared.txt": "from a\n"})
    run_pass(repo)
    stored = current(repo)
    assert states(repo) == {"a": "integrated"}
    assert f"(first commit {pushed}) while lanes" in stored.state.quarantined[0].reason
    # the branch people merge holds only verified work; the push is kept aside (issue 28 #6)
    assert pushed not in git(repo, "rev-list", "imm/init").split()
    assert head_of(repo, f"refs/imm/quarantine/{stored.state.batch_id}/1") == pushed


def test_a_candidate_breaking_a_sibling_check_is_parked_and_its_dependents_skipped(
    tmp_path: Path,
) -> None:
    checks = {"a": file_check("a.txt", "a", absent="broken")}
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": ["b"]},
                        scopes={"b": ["config.txt", "b.txt"]}, checks=checks)  # fmt: skip
    run_pass(repo)
    work(repo, "a")
    work(repo, "b", {"config.txt": "mode=broken\n", "b.txt": "b\n"})
    before = head_of(repo, "imm/init")
    run_pass(repo)
    stored = current(repo)
    reason = reasons(repo)["b"] or ""
    assert reason.startswith("batch_integration_check_failed: a:ok failed on candidate ")
    assert states(repo) == {"a": "integrated", "b": "needs_human", "c": "skipped_blocked"}
    assert reasons(repo)["c"] == "dependency b parked"
    assert head_of(repo, "imm/init") == stored.state.commits[-1] != before
    assert stored.state.batch_state == "needs_human"
    assert stored.report is not None
    assert ("retry", "init", "b") in [command.args for command in next_commands(stored.report)]
    (failure,) = stored.report.children[1].failures
    assert (failure.step, failure.exit_code) == ("a:ok", 1)
    assert failure.command.startswith("python3 -c ")


def test_a_failed_own_check_parks_the_lane(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    work(repo, "a", {"a.txt": "wrong\n"})
    run_pass(repo)
    assert (reasons(repo)["a"] or "").startswith("batch_integration_check_failed: a:ok failed")


def test_a_lane_that_needs_a_person_parks_with_its_reason(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    run_pass(repo)
    publish(repo, "a", None, state="needs_human", reason="QA failure limit reached")
    run_pass(repo)
    assert reasons(repo) == {"a": "QA failure limit reached", "b": "dependency a parked"}


def test_a_commit_pushed_while_no_lane_runs_is_adopted(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo, admit=False)  # a integrated, b not admitted yet: no lane runs
    head = head_of(repo, "imm/init")
    foreign = make_lane_commit(repo, head, "someone", {"notes.txt": "hi\n"}, batch_id="other")
    git(repo, "update-ref", "refs/heads/imm/init", foreign, head)
    run_pass(repo)  # adopts it, admits b on it
    work(repo, "b")
    run_pass(repo)
    stored = current(repo)
    assert [(a.from_, a.to) for a in stored.state.adopted_heads] == [(head, foreign)]
    assert states(repo) == {"a": "integrated", "b": "integrated"}
    assert git(repo, "rev-parse", "imm/init~1").strip() == foreign
    assert stored.state.batch_state == "completed"


def test_a_force_push_dropping_a_recorded_commit_is_kept_aside_and_loses_nothing(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)
    base = current(repo).state.base_head
    rewritten = make_lane_commit(repo, base, "rewrite", {"other.txt": "x\n"}, batch_id="none")
    git(repo, "update-ref", "refs/heads/imm/init", rewritten)
    work(repo, "b")
    run_pass(repo)
    stored = current(repo)
    # the rewrite is kept aside, the branch back at its last verified head, and b lands on it
    assert stored.state.batch_state == "completed"
    assert states(repo) == {"a": "integrated", "b": "integrated"}
    assert stored.state.quarantined[0].reason.startswith(
        "batch_head_lineage_broken: imm/init moved to"
    )
    assert head_of(repo, "imm/init") == stored.state.commits[-1]
    assert head_of(repo, f"refs/imm/quarantine/{stored.state.batch_id}/1") == rewritten
    assert set(stored.state.commits) <= set(git(repo, "rev-list", "imm/init").split())


def test_an_idle_pass_writes_no_new_state(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    first = current(repo).commit
    run_pass(repo)
    assert current(repo).commit == first


def test_a_new_batch_refuses_a_batch_branch_it_does_not_know(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    git(repo, "branch", "imm/init")
    git(repo, "commit", "--allow-empty", "-qm", "moved on")
    git(repo, "update-ref", "refs/heads/imm/init", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    with pytest.raises(UsageError, match="holds work that is not in main"):
        run_pass(repo)


def test_a_lane_whose_imm_run_died_is_started_again_without_counting_an_attempt(
    tmp_path: Path,
) -> None:
    import dataclasses
    import subprocess

    from imm_action.batches.pass_inputs import pass_ports, pass_request
    from imm_action.batches.repo import open_batch_repo
    from imm_action.carriers.source import Initiatives, NoIssueSource
    from imm_action.lanes.local import LocalLanes
    from imm_action.model.state import LocalRunner
    from imm_action.passes.driver import reconcile

    repo = make_project(tmp_path / "r", {"a": []})
    gone = subprocess.Popen(["true"])
    gone.wait()  # a coordinator pid that no longer exists
    batch_repo = open_batch_repo(repo, None, Initiatives(repo, NoIssueSource()))
    owner = LocalRunner(path="lane.log", pid=gone.pid)
    dead_owner = LocalLanes(gone.pid)
    dead_owner.runner_for = lambda _: owner  # type: ignore[method-assign]
    request = pass_request(batch_repo, "init", batch_id=None, admit=True)
    ports = pass_ports(batch_repo, lambda line: None, path_env="/usr/bin:/bin", lanes=dead_owner)
    reconcile(request, ports)
    # `imm reconcile` (not the coordinator) looks next: the owner is dead, the lane orphaned.
    request = dataclasses.replace(request, admit=False)
    reconcile(request, pass_ports(batch_repo, lambda line: None, path_env="/usr/bin:/bin"))
    (child,) = current(repo).state.children
    assert (str(child.state), child.attempts) == ("pending", 0)


def test_a_finished_batch_leaves_its_branch_its_state_ref_and_the_latest_batch_ref_only(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", THREE)
    run_pass(repo)
    lanes = {task: work(repo, task) for task in THREE}
    run_pass(repo)
    stored = current(repo)
    assert stored.state.batch_state == "completed"
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    assert refs == [
        "refs/heads/imm/init",
        "refs/heads/main",
        f"refs/imm/batches/{stored.state.batch_id}",
        "refs/imm/latest/init",
    ]
    assert [c.lane.lane_commit for c in stored.state.children if c.lane] == list(lanes.values())


def test_a_landed_lane_outcome_stays_reachable_from_the_state_chain(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", THREE)
    run_pass(repo)
    lanes = {task: work(repo, task) for task in THREE}
    run_pass(repo)
    stored = current(repo)
    landed = StateStore(open_local(repo).refs).landed_outcomes(stored.state.batch_id)
    assert sorted(landed) == sorted(THREE)
    for task, outcome in landed.items():
        assert git(repo, "rev-parse", f"{outcome}^").strip() == lanes[task]


def test_verify_parallel_sets_how_many_checks_of_a_stack_the_integrator_runs_at_once(
    tmp_path: Path,
) -> None:
    # Each task's check waits (up to 60 s) until every task's check has started: they can all
    # pass only if `verify_parallel` checks of the stack run at once, more than this machine's
    # cores (SPEC §5.4: the stack's checks run on its top, `verify_parallel` at a time).
    lanes = (os.cpu_count() or 1) + 1
    tasks = {f"t{index}": [] for index in range(lanes)}
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    code = (
        "import os, sys, time, uuid; d = sys.argv[1]; "
        "open(os.path.join(d, uuid.uuid4().hex), 'w'); "
        f"sys.exit(0 if any(len(os.listdir(d)) >= {lanes} or time.sleep(0.1) "
        "for _ in range(600)) else 1)"
    )
    checks = {task: descriptor(["-c", code, str(meeting), task]) for task in tasks}
    config = f"max_parallel: {lanes}\nverify_parallel: {lanes}\n"
    repo = make_project(tmp_path / "r", tasks, checks=checks,
                        extra_files={".github/imm.yml": config})  # fmt: skip
    run_pass(repo)
    for task in tasks:
        work(repo, task)
    assert run_pass(repo).integrated == tuple(tasks)


def test_a_retried_lane_is_not_taken_for_its_earlier_attempts_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "c": []})
    run_pass(repo)  # admits a and c
    publish(repo, "a", None, state="needs_human", reason="QA failure limit reached")
    run_pass(repo)
    assert {c.task_id: str(c.state) for c in current(repo).state.children}["a"] == "needs_human"
    code, _, err = run_cli(capsys, "retry", "init", "a", "--repo", str(repo))
    assert code == 0, err
    run_pass(repo)  # a is admitted again: its new lane has published nothing yet
    run_pass(repo)
    [a] = [c for c in current(repo).state.children if c.task_id == "a"]
    assert (str(a.state), a.reason) == ("lane_admitted", None)


def test_a_retry_runs_a_failed_check_again_on_the_same_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    # fails its first four runs, like a timeout on a loaded runner: its run on the top and the
    # three reruns that confirm the failure before a lane is parked (issue 61)
    flaky = descriptor(
        ["-c", f"import pathlib,sys; p=pathlib.Path({str(runs)!r}); n=len(p.read_text()) "
         f"if p.exists() else 0; p.write_text('x'*(n+1)); sys.exit(1 if n <= {FLAKE_RERUNS} "
         "else 0)"]
    )  # fmt: skip
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": flaky})
    run_pass(repo)
    work(repo, "a")
    run_pass(repo)
    assert str(current(repo).state.children[0].state) == "needs_human"
    assert run_cli(capsys, "retry", "init", "a", "--repo", str(repo))[0] == 0
    run_pass(repo)
    work(repo, "a")  # the same change again: the same candidate tree
    run_pass(repo)
    assert runs.read_text() == "x" * (FLAKE_RERUNS + 2)
    assert str(current(repo).state.children[0].state) == "integrated"
