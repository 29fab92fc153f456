"""A batch that stopped continues after a fix (SPEC §5.7), with real git and real executors:
tasks already integrated keep their commits, the base branch's new commits are merged in with
one merge-tree commit, and the rest is planned from the committed files."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.integrate.continuation import Stopped
from imm_action.passes.driver import reconcile
from tests.batch_helpers import current, file_check, make_project, open_local, run_pass
from tests.conftest import git, initiative_markdown, intent, run_cli
from tests.integration.test_local_run import EXECUTOR, imm_run_argv

TASKS = {"a": [], "b": ["a"], "c": ["b"], "d": []}
# b's check wants text its executor never writes: a wrong descriptor, fixed by a commit.
BROKEN = {"b": file_check("b.txt", "bee")}


@pytest.fixture(autouse=True)
def behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "behaviour.json"
    path.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))


def imm(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(capsys, *argv)


def run(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str, str]:
    return imm(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR, *extra)


def stopped_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, dict[str, str]]:
    """a and d integrated, b parked by its wrong descriptor, c skipped behind it."""
    repo = make_project(tmp_path / "r", TASKS, checks=BROKEN)
    code, _, err = run(capsys, repo)
    assert code == 1, err
    state = current(repo).state
    assert {c.task_id: str(c.state) for c in state.children} == {
        "a": "integrated", "b": "needs_human", "c": "skipped_blocked", "d": "integrated"
    }  # fmt: skip
    return repo, {c.task_id: c.commit for c in state.children if c.commit}


def fix_the_intent(repo: Path) -> str:
    """The person's fix: the intent with the right descriptor, committed on main."""
    fixed = intent("b", scope_hint=["b.txt"], acceptance=[
        {"id": "ok", "assertion": "b works", "verification": file_check("b.txt", "b")}
    ])  # fmt: skip
    (repo / "docs/plans/b.intent.json").write_text(json.dumps(fixed, indent=2) + "\n")
    git(repo, "commit", "-qam", "Fix b's check")
    return git(repo, "rev-parse", "HEAD").strip()


def test_imm_run_continues_a_stopped_batch_after_a_committed_fix_keeping_what_landed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, landed = stopped_batch(tmp_path, capsys)
    first = current(repo).state.batch_id
    fix = fix_the_intent(repo)
    code, out, err = run(capsys, repo)
    assert code == 0, err
    stored = current(repo)
    state = stored.state
    assert state.batch_id != first
    assert state.batch_state == "completed"
    assert state.continues is not None
    assert state.continues.batch_id == first
    assert {c.task_id: c.commit for c in state.children if c.task_id in landed} == landed
    assert {c.task_id for c in state.children if c.state.done} == set(TASKS)
    branch = git(repo, "rev-list", "imm/init").split()
    assert set(landed.values()) <= set(branch)
    assert fix in branch  # main's fix was merged in, not replayed
    assert git(repo, "show", "imm/init:b.txt") == "b\n"
    assert f"continues {first}: 2 tasks already integrated, plan changed: b" in out + err


def test_the_merge_of_the_base_is_one_commit_made_without_a_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _ = stopped_batch(tmp_path, capsys)
    old_head = git(repo, "rev-parse", "imm/init").strip()
    fix = fix_the_intent(repo)
    before = (repo / ".git/index").read_bytes(), git(repo, "rev-parse", "HEAD")
    assert run(capsys, repo)[0] == 0
    merge = current(repo).state.base_head
    assert git(repo, "rev-list", "--parents", "-n1", merge).split()[1:] == [old_head, fix]
    assert ((repo / ".git/index").read_bytes(), git(repo, "rev-parse", "HEAD")) == before


def test_retry_of_a_task_whose_intent_changed_continues_the_batch_for_it_and_its_dependents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, landed = stopped_batch(tmp_path, capsys)
    first = current(repo).state.batch_id
    fix_the_intent(repo)
    code, _, err = imm(capsys, "retry", "init", "b", "--repo", str(repo))
    assert code == 0, err
    state = current(repo).state
    assert state.continues is not None
    assert state.continues.batch_id == first
    assert {c.task_id: str(c.state) for c in state.children} == {
        "a": "integrated", "b": "pending", "c": "pending", "d": "integrated"
    }  # fmt: skip
    assert run(capsys, repo)[0] == 0
    assert {c.task_id: c.commit for c in current(repo).state.children if c.task_id in landed} == (
        landed
    )


def test_a_cancelled_batch_continues_with_imm_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, landed = stopped_batch(tmp_path, capsys)
    assert imm(capsys, "cancel", "init", "--repo", str(repo))[0] == 0
    fix_the_intent(repo)
    assert run(capsys, repo)[0] == 0
    state = current(repo).state
    assert state.batch_state == "completed"
    assert {c.task_id: c.commit for c in state.children if c.task_id in landed} == landed


def test_fresh_archives_the_old_branch_and_starts_from_the_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, landed = stopped_batch(tmp_path, capsys)
    old = current(repo).state
    old_head = git(repo, "rev-parse", "imm/init").strip()
    fix = fix_the_intent(repo)
    code, out, err = run(capsys, repo, "--fresh")
    assert code == 0, err
    assert git(repo, "rev-parse", f"refs/imm/archive/{old.batch_id}").strip() == old_head
    assert f"refs/imm/archive/{old.batch_id}" in out + err
    assert "discards" in out + err
    state = current(repo).state
    assert state.base_head == fix
    assert state.continues is None
    assert state.batch_state == "completed"
    assert not set(landed.values()) & {c.commit for c in state.children}
    assert old_head not in git(repo, "rev-list", "imm/init").split()


def test_a_conflict_merging_the_base_stops_naming_the_paths_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _ = stopped_batch(tmp_path, capsys)
    (repo / "a.txt").write_text("someone else's a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "a.txt on main too")
    refs = git(repo, "for-each-ref")
    code, _, err = run(capsys, repo)
    assert code == 1
    assert "a.txt" in err
    assert git(repo, "for-each-ref") == refs


def test_a_batch_branch_equal_to_the_base_head_is_not_foreign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    git(repo, "branch", "imm/init")
    code, _, err = run(capsys, repo)
    assert code == 0, err


def test_a_batch_whose_plan_changed_while_lanes_were_in_flight_is_continued(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)  # a and b admitted
    path = repo / "docs/plans/b.intent.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "revision": 2, "goal": "Do b, fixed"}, indent=2) + "\n")
    git(repo, "commit", "-qam", "fix b's intent")
    assert run_pass(repo).stored.state.batch_state == "needs_human"  # batch_plan_changed
    batch_repo = open_local(repo)
    request = pass_request(batch_repo, "init", batch_id=None, admit=True, stopped=Stopped.CONTINUE)
    request = dataclasses.replace(request, new_batch_id="batch-init-continued")
    ports = pass_ports(batch_repo, lambda line: None, path_env=os.environ["PATH"])
    state = reconcile(request, ports).stored.state  # what `imm run init` does
    assert state.batch_id == "batch-init-continued"
    assert {c.task_id: str(c.state) for c in state.children} == {
        "a": "lane_admitted",
        "b": "lane_admitted",
    }


def test_fresh_after_a_completed_unmerged_batch_reruns_every_task_and_keeps_the_archive_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 #6: the first batch completed, its branch never merged into main."""
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    assert run(capsys, repo)[0] == 0
    first = current(repo).state
    old_head = git(repo, "rev-parse", "imm/init").strip()
    code, _, err = run(capsys, repo, "--fresh")
    assert code == 0, err
    archive = f"refs/imm/archive/{first.batch_id}"
    assert f"kept as {archive}" in err
    assert git(repo, "rev-parse", archive).strip() == old_head
    second = current(repo).state
    assert second.batch_id != first.batch_id
    assert [c.task_id for c in second.children if c.commit] == ["a", "b"]
    assert set(second.commits).isdisjoint(first.commits)  # done again, from main


def test_fresh_keeps_as_done_what_an_earlier_batch_got_merged_into_the_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    assert run(capsys, repo)[0] == 0
    git(repo, "merge", "-q", "--ff-only", "imm/init")
    code, _, err = run(capsys, repo, "--fresh")
    assert code == 2
    assert "nothing is enrollable, no batch started" in err
    assert "discards" not in err


def test_a_continuation_makes_no_merge_commit_when_the_base_brings_nothing_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30 #6: main merged the stopped batch's branch (a merge commit, nothing else); the
    continuation has nothing to bring in, and says nothing was merged."""
    repo, _ = stopped_batch(tmp_path, capsys)
    git(repo, "merge", "-q", "--no-ff", "-m", "take what landed so far", "imm/init")
    head = git(repo, "rev-parse", "imm/init").strip()
    run(capsys, repo)
    subjects = git(repo, "log", "--format=%s", f"{head}..imm/init").splitlines()
    assert not any(subject.startswith("imm: merge main into") for subject in subjects)
    continues = current(repo).state.continues
    assert continues is not None
    assert continues.merged_base is None


def _fresh_after_a_completed_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behaviour: Path
) -> Path:
    """Issue 41 #1, the calc walkthrough: a and b completed on a branch nobody merged; then b
    is broken and a new task m added, and the batch started afresh from main."""
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    assert run(capsys, repo)[0] == 0
    (repo / "docs/initiatives/init.md").write_text(
        initiative_markdown({"a": [], "b": ["a"], "m": ["a"]})
    )
    (repo / "docs/plans/m.intent.json").write_text(
        json.dumps(intent("m", scope_hint=["m.txt"])) + "\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a new task m")
    behaviour.write_text(json.dumps({"b": "always_wrong"}))
    return repo


def test_a_continued_fresh_batch_runs_again_what_only_the_archived_batch_integrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    behaviour = Path(os.environ["IMM_TEST_BEHAVIOUR"])
    repo = _fresh_after_a_completed_batch(tmp_path, capsys, behaviour)
    code, _, err = run(capsys, repo, "--fresh")
    assert code == 1, err
    parked = current(repo).state
    assert {c.task_id: str(c.state) for c in parked.children}["b"] == "needs_human"
    behaviour.write_text("{}")  # the fix
    code, _, err = run(capsys, repo)
    assert code == 0, err
    state = current(repo).state
    assert state.continues is not None
    assert state.continues.batch_id == parked.batch_id
    assert state.batch_state == "completed"
    assert {c.task_id for c in state.children if c.state.done} == {"a", "b", "m"}
    assert git(repo, "show", "imm/init:b.txt") == "b\n"
    assert git(repo, "show", "imm/init:m.txt") == "m\n"


def test_an_interrupted_fresh_batch_resumes_with_its_own_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Ctrl-C variant: the fresh batch is interrupted while a's lane is at work."""
    behaviour = Path(os.environ["IMM_TEST_BEHAVIOUR"])
    repo = _fresh_after_a_completed_batch(tmp_path, capsys, behaviour)
    behaviour.write_text(json.dumps({"a": "sleep:60"}))
    process = subprocess.Popen(
        [*imm_run_argv(repo), "--fresh"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:  # Ctrl-C once a's lane is at work, however loaded the machine
        if " started (log: " in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # leave no process behind a failing test
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    assert process.returncode == 130
    interrupted = current(repo).state
    assert interrupted.batch_state == "running"
    behaviour.write_text("{}")
    code, out, err = run(capsys, repo)
    assert code == 0, out + err
    assert "batch_plan_changed" not in out + err
    state = current(repo).state
    assert state.batch_id == interrupted.batch_id  # resumed, not replanned
    assert state.batch_state == "completed"
    assert {c.task_id for c in state.children if c.state.done} == {"a", "b", "m"}
    for task in ("a", "b", "m"):
        assert git(repo, "show", f"imm/init:{task}.txt") == f"{task}\n"


def test_a_continuation_with_every_task_settled_elsewhere_is_a_report_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The person merged the archived branch into main after a --fresh batch parked: nothing
    is left for the continuation to run."""
    behaviour = Path(os.environ["IMM_TEST_BEHAVIOUR"])
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    assert run(capsys, repo)[0] == 0
    archived = current(repo).state.batch_id
    behaviour.write_text(json.dumps({"a": "always_wrong"}))
    assert run(capsys, repo, "--fresh")[0] == 1
    git(repo, "merge", "-q", "--no-ff", "-m", "take it", f"refs/imm/archive/{archived}")
    refs = git(repo, "for-each-ref")
    code, out, err = run(capsys, repo)
    assert code == 2, out + err
    assert "unexpected error" not in err
    assert f"every task of init is integrated already (a, b by {archived})" in err
    assert git(repo, "for-each-ref") == refs


def _stopped_on_three_lanes_and_fixed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    repo = make_project(tmp_path / "r", TASKS, checks=BROKEN)
    assert run(capsys, repo, "--max-parallel", "3")[0] == 1
    fix_the_intent(repo)
    return repo


def test_a_retry_continuation_keeps_the_stopped_batchs_max_parallel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41 #2: the config says 4, the person ran with 3."""
    repo = _stopped_on_three_lanes_and_fixed(tmp_path, capsys)
    code, _, err = imm(capsys, "retry", "init", "b", "--repo", str(repo))
    assert code == 0, err
    assert current(repo).state.max_parallel == 3
    assert "keeps its max_parallel 3" in err
    code, out, err = run(capsys, repo, "--max-parallel", "3")  # the person's own option
    assert code == 0, out + err
    assert current(repo).state.batch_state == "completed"


def test_an_imm_run_continuation_keeps_the_stopped_batchs_max_parallel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _stopped_on_three_lanes_and_fixed(tmp_path, capsys)
    code, out, err = run(capsys, repo)
    assert code == 0, out + err
    assert current(repo).state.max_parallel == 3
    assert "keeps its max_parallel 3" in err


def test_a_continuation_takes_the_max_parallel_the_person_asks_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _stopped_on_three_lanes_and_fixed(tmp_path, capsys)
    code, out, err = run(capsys, repo, "--max-parallel", "2")
    assert code == 0, out + err
    assert current(repo).state.max_parallel == 2
    assert "keeps its max_parallel" not in err


def test_a_task_two_batches_integrated_is_settled_when_the_older_ones_work_is_on_the_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    assert run(capsys, repo)[0] == 0
    first = current(repo).state.batch_id
    assert run(capsys, repo, "--fresh")[0] == 0  # a and b again, on a branch nobody merges
    git(repo, "merge", "-q", "--no-ff", "-m", "take the first", f"refs/imm/archive/{first}")
    code, _, err = run(capsys, repo, "--fresh")
    assert code == 2, err
    assert "nothing is enrollable, no batch started" in err
