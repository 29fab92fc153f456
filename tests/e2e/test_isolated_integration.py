"""The integrate job runs lanes' checks as another user, with what `check_setup` installed
(issue 20, ADRs 0031-0033): under act, with the shipped workflows, as GitHub would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import descriptor
from tests.e2e.act_world import TOKEN, ActWorld
from tests.isolation_probe import PROBE, findings

# the project's tests need pytest, which only check_setup installs
SETUP = (
    'check_setup: bash -c "python3 -m venv $HOME/.venv && '
    '$HOME/.venv/bin/pip install -q --disable-pip-version-check pytest"\n'
)
TEST_B = """\
import pathlib


def test_b_names_itself():
    assert pathlib.Path("b.txt").read_text() == "b\\n"
"""


def test_the_integrate_job_runs_lane_code_out_of_the_tokens_reach_with_setup_once(
    world: ActWorld, open_dir: Path
) -> None:
    evidence = open_dir  # where the probe writes what it found: open to the check user
    targets = [str(world.root / "gitconfig"), str(world.home / ".gitconfig")]
    checks = {
        "a": descriptor(["a_attack.py", str(evidence), json.dumps(targets)]),
        "b": descriptor(
            ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_b.py"], executable="python"
        ),
    }
    world.behaviour = {"a": "attack"}
    files = {"tools/attack.py": PROBE, "test_b.py": TEST_B}
    world.create({"a": [], "b": []}, "guard", checks=checks, config=SETUP, files=files)
    before = {target: Path(target).read_bytes() for target in targets if Path(target).exists()}
    world.dispatch({"initiative": "guard"})
    runs = world.run_dispatches()
    assert {run.exit_code for run in runs} == {0}, runs[-1].log[-4000:]
    assert world.state()["batch_state"] == "completed"
    for run in runs:  # each integrate job: isolated, and setup once before its first check
        assert "integration checks run as user imm-check" in run.log
        assert run.log.count("check_setup passed") == 1
    found = findings(evidence)
    assert found["uid"] != 0  # the integrate job ran it as the check user
    assert TOKEN not in found["read"]
    assert found["processes"] <= 3  # its own namespace
    assert found["wrote"] == []
    after = {target: Path(target).read_bytes() for target in targets if Path(target).exists()}
    assert after == before
