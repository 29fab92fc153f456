"""`check_setup` runs in a checkout of the commit the plan was made from, in lane jobs, verify
jobs and `imm run` alike (issue 59 #4): what earlier lanes wrote is never run by it. A lane
job checks out the batch head (`fetch-depth: 1`), and setup ran there — a landed lane's setup
script, with the job's registry settings and the network.

Here the setup script leaves a program on the checks' PATH that says which script made it;
task `a` rewrites the script, lands, and `b`'s lane job (a shallow clone of the batch head, as
the workflow makes it) runs `b`'s check, which passes only where the plan's script ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import make_project, run_pass, work
from tests.conftest import descriptor, git, run_cli

EXECUTOR = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'lane_executor.py'}"


def _setup_script(says: str) -> str:
    """Leaves `which-setup` (printing `says`) in setup's home, on every check's PATH."""
    return (
        'mkdir -p "$HOME/.local/bin"\n'
        f"printf '#!/bin/sh\\necho {says}\\n' > \"$HOME/.local/bin/which-setup\"\n"
        'chmod +x "$HOME/.local/bin/which-setup"\n'
    )


def test_a_lane_job_runs_check_setup_from_the_plans_commit_not_a_landed_lanes_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = {"b": descriptor(["-c", 'test "$(which-setup)" = plan'], executable="sh")}
    project = make_project(
        tmp_path / "project", {"a": [], "b": ["a"]}, checks=checks,
        scopes={"a": ["a.txt", "scripts/setup.sh"], "b": ["b.txt"]},
        extra_files={".github/imm.yml": "check_setup: sh scripts/setup.sh\n",
                     "scripts/setup.sh": _setup_script("plan")},
    )  # fmt: skip
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    run_pass(project, remote="origin")
    git(project, "fetch", "-q", "origin", "+refs/imm/*:refs/imm/*")
    work(project, "a", {"a.txt": "a\n", "scripts/setup.sh": _setup_script("lane")})
    git(project, "push", "-q", "origin", "refs/heads/imm-lane/*:refs/heads/imm-lane/*",
        "+refs/imm/*:refs/imm/*")  # fmt: skip
    landed = run_pass(project, remote="origin")
    child = {c.task_id: c for c in landed.stored.state.children}["b"]
    assert child.lane is not None, "b was not admitted once a landed"
    # the lane job: a shallow clone of the lane's base, the batch head that holds a's script
    job = tmp_path / "job"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "imm/init",
        f"file://{remote}", str(job))  # fmt: skip
    assert "lane" in (job / "scripts" / "setup.sh").read_text()
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"b": "ok"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    batch = landed.stored.state.batch_id
    log = tmp_path / "lane.log"
    argv = ["lane", "--repo", str(job), "--remote", "origin", "--batch-id", batch, "--task", "b",
            "--executor", EXECUTOR, "--log", str(log)]  # fmt: skip
    assert run_cli(capsys, *argv, "--phase", "fetch")[0] == 0
    code, _, err = run_cli(capsys, *argv, "--phase", "work")
    said = log.read_text() + err
    assert code == 0, said
    assert "check_setup passed" in said
