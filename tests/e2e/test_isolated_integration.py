"""The integrate job runs lanes' checks as another user, with what `check_setup` installed
(issue 20, ADRs 0031-0033): under act, with the shipped workflows, as GitHub would."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import descriptor
from tests.e2e.act_world import TOKEN, ActWorld

ATTACK = """\
import glob, json, os, pathlib, subprocess, sys
evidence, targets = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
if os.getuid() == 0:
    # the lane job's run: that job holds no write token (ADR 0026), and under act it shares
    # this host with the integrate job, which on GitHub it never does: attack there only
    sys.exit(0)
found = {"uid": os.getuid(), "read": "", "wrote": [], "processes": 0}
for folder in glob.glob("/proc/[0-9]*"):
    found["processes"] += 1
    for name in ("environ", "cmdline"):
        try:
            found["read"] += pathlib.Path(folder, name).read_bytes().decode("latin-1")
        except OSError:
            pass
for target in targets:
    try:
        with open(target, "a") as handle:
            handle.write("[url \\"http://127.0.0.1:9/\\"]\\n\\tinsteadOf = https://github.com/\\n")
        found["wrote"].append(target)
    except OSError:
        pass
subprocess.Popen(["sleep", "299.75"], start_new_session=True)
(evidence / f"found-{os.getuid()}.json").write_text(json.dumps(found))
"""

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


@pytest.fixture
def evidence() -> Iterator[Path]:
    """Where the attack writes what it found: open to the check user."""
    folder = Path(tempfile.mkdtemp(prefix="imm-e2e-evidence-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_integrate_job_runs_lane_code_out_of_the_tokens_reach_with_setup_once(
    world: ActWorld, evidence: Path
) -> None:
    targets = [str(world.root / "gitconfig"), str(world.home / ".gitconfig")]
    checks = {
        "a": descriptor(["a_attack.py", str(evidence), json.dumps(targets)]),
        "b": descriptor(
            ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_b.py"], executable="python"
        ),
    }
    world.behaviour = {"a": "attack"}
    files = {"tools/attack.py": ATTACK, "test_b.py": TEST_B}
    world.create({"a": [], "b": []}, "guard", checks=checks, config=SETUP, files=files)
    before = {target: Path(target).read_bytes() for target in targets if Path(target).exists()}
    world.dispatch({"initiative": "guard"})
    runs = world.run_dispatches()
    assert {run.exit_code for run in runs} == {0}, runs[-1].log[-4000:]
    assert world.state()["batch_state"] == "completed"
    for run in runs:  # each integrate job: isolated, and setup once before its first check
        assert "integration checks run as user imm-check" in run.log
        assert run.log.count("check_setup passed") == 1
    [found] = [json.loads(path.read_text()) for path in evidence.glob("found-*.json")]
    assert found["uid"] != 0  # the integrate job ran it as the check user
    assert TOKEN not in found["read"]
    assert found["processes"] <= 3  # its own namespace
    assert found["wrote"] == []
    after = {target: Path(target).read_bytes() for target in targets if Path(target).exists()}
    assert after == before
