"""What `check_setup` prepared in one job works restored in another (issue 62 #6): the lane
job's fetch step says where setup's result is kept and the key it is saved under; a later job,
in a clone at another path (as act's jobs are, and self-hosted runners' may be), gets the same
key, and with the folder restored there its checks reuse it and install nothing. A folder that
came back without the mark setup writes last is set up again.

The setup here leaves a program that names its home by path, as a venv's scripts name their
interpreter: it works in the second job only where setup's home is seen at the same path."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import make_project, run_pass
from tests.conftest import as_github_step, descriptor, git, run_cli, step_outputs

EXECUTOR = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'lane_executor.py'}"
# a program on the checks' PATH that reads a file by the path setup's $HOME had, baked in as a
# venv's scripts name their interpreter
SETUP_SCRIPT = """\
mkdir -p "$HOME/.local/bin"
echo plan > "$HOME/said"
printf '#!/bin/sh\\ncat %s/said\\n' "$HOME" > "$HOME/.local/bin/which-setup"
chmod +x "$HOME/.local/bin/which-setup"
"""


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, str]:
    """A project whose one task's check runs what setup left, its batch planned on a remote."""
    checks = {"b": descriptor(["-c", 'test "$(which-setup)" = plan'], executable="sh")}
    project = make_project(
        tmp_path / "project", {"b": []}, checks=checks,
        extra_files={".github/imm.yml": "check_setup: sh scripts/setup.sh\n",
                     "scripts/setup.sh": SETUP_SCRIPT},
    )  # fmt: skip
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(bare))
    git(project, "remote", "add", "origin", str(bare))
    batch = run_pass(project, remote="origin").stored.state.batch_id
    return bare, batch


def _lane_job(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    remote: tuple[Path, str],
    clone: Path,
    restore: Path | None = None,
) -> tuple[dict[str, str], str]:
    """One lane job in a fresh clone at `clone`: its fetch step's outputs, `restore` (a saved
    setup folder) copied where they say, then its work step's log."""
    bare, batch = remote
    clone.parent.mkdir(parents=True, exist_ok=True)
    git(clone.parent, "clone", "-q", "--depth", "1", "--branch", "imm/init", f"file://{bare}",
        str(clone))  # fmt: skip
    # the runner's file commands lie in a folder of their own, which the sandbox hides
    commands = clone.parent / f"{clone.name}-file-commands"
    commands.mkdir()
    as_github_step(monkeypatch, commands)
    behaviour = clone.parent / "behaviour.json"
    behaviour.write_text(json.dumps({"b": "ok"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    log = clone.parent / f"{clone.name}.log"
    argv = ["lane", "--repo", str(clone), "--remote", "origin", "--batch-id", batch,
            "--task", "b", "--executor", EXECUTOR, "--log", str(log)]  # fmt: skip
    assert run_cli(capsys, *argv, "--phase", "fetch")[0] == 0
    said = step_outputs(commands / "outputs")
    if restore is not None:
        shutil.copytree(restore, said["setup-path"])
    code, _, err = run_cli(capsys, *argv, "--phase", "work")
    assert code == 0, log.read_text() + err
    return said, log.read_text() + err


def test_setup_restored_into_a_clone_at_another_path_is_reused_and_installs_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    remote: tuple[Path, str],
) -> None:
    first, said = _lane_job(capsys, monkeypatch, remote, tmp_path / "job1")
    assert "check_setup passed" in said
    assert (Path(first["setup-path"]) / "ready").is_file()  # what the save step looks for
    saved = tmp_path / "cache"
    shutil.copytree(first["setup-path"], saved)
    shutil.rmtree(tmp_path / "job1")  # a runner that is gone: nothing of its paths is left
    second, said = _lane_job(capsys, monkeypatch, remote, tmp_path / "other" / "runner" / "job2",
                             restore=saved)  # fmt: skip
    assert second["setup-key"] == first["setup-key"]
    assert second["setup-path"] != first["setup-path"]
    assert "check_setup: reused what it prepared before" in said
    assert "check_setup passed" not in said


def test_a_restored_folder_without_the_ready_mark_is_set_up_again(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    remote: tuple[Path, str],
) -> None:
    first, _ = _lane_job(capsys, monkeypatch, remote, tmp_path / "job1")
    cut = tmp_path / "cut-short"
    shutil.copytree(first["setup-path"], cut)
    (cut / "ready").unlink()  # a save or restore cut short
    _, said = _lane_job(capsys, monkeypatch, remote, tmp_path / "job2", restore=cut)
    assert "check_setup passed" in said
    assert "reused what it prepared" not in said
