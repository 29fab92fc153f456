"""Without `check_setup`, a lane's checks and the integrator's see the same environment: the
runner's own tools (issue 29 #1-#2, ADR 0048). Here the pyenv Python under root's 0700 home,
which has pytest: under ADR 0031 the integrate job's check user could not reach it and every
such lane parked at integration after passing in its lane. A program no key prepares fails in
the lane, and says which key would."""

from __future__ import annotations

from tests.conftest import descriptor
from tests.e2e.act_world import ActWorld

TEST_B = """\
import pathlib


def test_b_names_itself():
    assert pathlib.Path("b.txt").read_text() == "b\\n"
"""


def test_without_check_setup_the_lanes_and_the_integrators_checks_see_the_runners_tools(
    world: ActWorld,
) -> None:
    checks = {"b": descriptor(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_b.py"])}
    world.create({"a": [], "b": []}, "guard", checks=checks, files={"test_b.py": TEST_B})
    world.dispatch({"initiative": "guard"})
    world.run_dispatches()
    children = {c["task_id"]: c for c in world.state()["children"]}
    assert children["a"]["state"] == "integrated"
    assert children["b"]["state"] == "integrated"


def test_a_check_whose_program_nothing_installs_parks_in_its_lane_naming_check_setup(
    world: ActWorld,
) -> None:
    checks = {"b": descriptor(["--version"], executable="imm-no-such-tool")}
    world.create({"a": [], "b": []}, "guard", checks=checks)
    world.dispatch({"initiative": "guard"})
    world.run_dispatches()
    children = {c["task_id"]: c for c in world.state()["children"]}
    assert children["a"]["state"] == "integrated"
    assert children["b"]["state"] == "needs_human"
    assert "batch_integration_check_failed" not in children["b"]["reason"]  # never landed
    findings = " ".join(f.get("error") or "" for f in children["b"].get("findings", []))
    assert "check_setup" in findings + str(children["b"].get("failures", ""))
