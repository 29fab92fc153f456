"""`imm status` after an interrupted run tells one story (issue 62 #4): not "1 lane in flight"
above "no process is at work on it"; and the branch-check line names the head it judged, even
when the run stopped between a move and the end of its pass (it named a head two moves old)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from tests.batch_helpers import current, make_project, run_pass, work
from tests.conftest import git, run_cli
from tests.integration.test_crash_safety import CrashingRefStore, SimulatedCrash
from tests.integration.test_local_run_crash import imm_run_argv


def test_status_of_a_run_stopped_with_a_lane_at_work_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "sleep:30"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    repo = make_project(tmp_path / "r", {"a": []})
    process = subprocess.Popen(
        imm_run_argv(repo), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:  # Ctrl-C once the lane is at work
        if " started (log: " in line:
            break
    time.sleep(0.3)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=30)
    assert process.returncode == 130
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    assert "in flight" not in out, out
    assert (
        "0 of 1 task integrated; a stopped at work when the run ended (to run again); no "
        "process is at work on it"
    ) in " ".join(out.split()), out
    assert "imm run init" in out or "imm_action run init" in out  # the line that resumes


def test_a_move_records_the_branch_checks_verdict_on_the_head_it_moves_to(
    tmp_path: Path,
) -> None:
    """The pass dies right after the move's CAS: the state it wrote already names the new
    head's verdict, not the one before (or none, on the first move)."""
    suite = "python3 -c 'pass'"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={
        ".github/imm.yml": f"branch_checks:\n  - {json.dumps(suite)}\n"})  # fmt: skip
    run_pass(repo)
    work(repo, "a")
    with pytest.raises(SimulatedCrash):
        run_pass(repo, refs=CrashingRefStore(GitRepo(repo), 1, "after"))
    head = git(repo, "rev-parse", "imm/init").strip()
    state = current(repo).state
    assert [c.state for c in state.children] == ["integrated"]  # the move was made
    assert [(v.head, v.passed) for v in state.branch_verdicts] == [(head, True)]
