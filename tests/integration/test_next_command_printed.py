"""Every stop prints the next command to paste, and what it says of the batch branch is true
(issue 30 #3, #6)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import git, initiative_markdown, intent, run_cli
from tests.integration.test_local_run import EXECUTOR


@pytest.fixture(autouse=True)
def _behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "behaviour.json"
    path.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))


def _run(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR, *extra)


def _add_a_task(repo: Path) -> None:
    (repo / "docs/initiatives/init.md").write_text(initiative_markdown({"a": [], "n": ["a"]}))
    (repo / "docs/plans/n.intent.json").write_text(
        json.dumps(intent("n", scope_hint=["n.txt"])) + "\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a new task")


def test_running_again_after_a_completed_batch_says_whose_the_branch_is_and_offers_fresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    assert _run(capsys, repo)[0] == 0
    finished = current(repo).state.batch_id
    _add_a_task(repo)
    code, _, err = _run(capsys, repo)
    assert code == 2
    assert "belongs to no finished batch" not in err
    assert f"imm/init holds the work of batch {finished} (completed)" in err
    assert "imm run init --fresh" in err
    assert _run(capsys, repo, "--fresh")[0] == 0  # what it offers works


def test_status_of_a_completed_batch_whose_branch_was_merged_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    assert _run(capsys, repo)[0] == 0
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert "merge it into main" in out  # not merged yet: true
    git(repo, "merge", "-q", "--ff-only", "imm/init")
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    assert "merge it" not in out
    assert "imm/init is merged into main" in out


def test_a_completed_run_ends_with_the_command_that_runs_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    code, out, _ = _run(capsys, repo)
    assert code == 0
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("  imm run init --fresh --repo ")
    assert "--executor" in last


def test_retry_ends_with_the_imm_run_command_that_starts_the_lane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "always_wrong"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    assert _run(capsys, repo)[0] == 1
    behaviour.write_text("{}")
    code, out, err = run_cli(capsys, "retry", "init", "a", "--repo", str(repo))
    assert code == 0, err
    assert "start the admitted lanes" not in out
    lines = out.rstrip().splitlines()
    assert lines[-2] == "next: run the batch to start its lanes:"
    # the executor the batch ran with, not set in the config: pasted, the line runs it
    assert lines[-1] == f"  imm run init --repo {repo} --executor {shlex.quote(EXECUTOR)}"
    assert _run(capsys, repo)[0] == 0  # what it says to run completes the batch


def test_imm_plan_shows_markdown_on_a_terminal_and_json_to_a_pipe(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    argv = [sys.executable, "-m", "imm_action", "plan", "init", "--repo", str(repo)]
    piped = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert json.loads(piped.stdout)["contract"] == "imm_action/batch_plan/v1"
    leader, follower = pty.openpty()
    shown = subprocess.run(argv, stdout=follower, stderr=subprocess.PIPE, check=True)
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed: all was read
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert shown.returncode == 0
    text = output.decode()
    assert "```mermaid" in text
    assert '"contract"' not in text
