"""The lane and integrate jobs run lanes' checks in the sandbox, with what `check_setup`
installed (issues 20, 29; ADRs 0032, 0048): under act, with the shipped workflows, as GitHub
would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import descriptor
from tests.e2e.act_world import TOKEN, ActRun, ActWorld
from tests.isolation_probe import PROBE, SLEEPER, findings, running_with

# the project's tests need pytest, which only check_setup installs (into a venv without a pip
# of its own, by the runner's: seeding a venv with pip was half of this file's CPU, issue 46)
SETUP = (
    'check_setup: bash -c "python3 -m venv --without-pip $HOME/.venv && python3 -m pip '
    '--python $HOME/.venv/bin/python install -q --disable-pip-version-check pytest"\n'
)
TEST_B = """\
import pathlib


def test_b_names_itself():
    assert pathlib.Path("b.txt").read_text() == "b\\n"
"""


def test_the_integrate_job_runs_lane_code_out_of_the_tokens_reach_with_setup_once(
    world: ActWorld,
) -> None:
    evidence = world.evidence  # where the probe writes what it found (writable in the sandbox)
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
    for run in runs:  # the lane jobs and the integrate job: each says it runs lane code in it
        sandboxed = [line.split("]", 1)[0] for line in run.log.splitlines()
                     if "lane code runs in a bubblewrap sandbox" in line]  # fmt: skip
        assert any("/imm lane " in job for job in sandboxed), sandboxed
        assert any("/integrate" in job for job in sandboxed), sandboxed
    # setup once per fleet (issue 62 #6): the first lane job installs and saves what setup
    # prepared; the next restores it and installs nothing
    installed = _jobs_saying(runs, "imm: check_setup passed in")
    assert [job for job in installed if "/imm lane " in job] == [installed[0]], installed
    assert len(_jobs_saying(runs, "Cache saved with key: ")) == 1
    restored = _jobs_saying(runs, "Cache restored from key: ")
    assert any("/imm lane " in job for job in restored), restored
    reused = _jobs_saying(runs, "imm: check_setup: reused what it prepared before")
    assert set(restored) <= set(reused), (restored, reused)
    found = findings(evidence)
    assert len(found) >= 2  # in a lane job and at integration
    for run in found:
        assert TOKEN not in run["read"]
        assert run["processes"] <= 4  # its own namespace
        # what it "wrote" outside its tree went to the sandbox's private /tmp (the world lies
        # under /tmp here) and is gone: the targets are compared byte for byte below
    after = {target: Path(target).read_bytes() for target in targets if Path(target).exists()}
    assert after == before
    assert running_with(SLEEPER) == []


def _jobs_saying(runs: list[ActRun], words: str) -> list[str]:
    """The jobs (`[workflow/job]`, in the order they said it) whose log has `words`."""
    jobs = [
        line.split("]", 1)[0]
        for run in runs
        for line in run.log.splitlines()
        if f"| {words}" in line
    ]  # fmt: skip (what a step printed, not its script)
    return list(dict.fromkeys(jobs))
