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


def test_without_check_setup_the_checks_see_the_runners_tools_and_a_missing_one_names_the_key(
    world: ActWorld,
) -> None:
    """b's check runs the runner's pytest and lands; c's runs a program nothing installs and
    parks in its lane, naming `check_setup` (one world for both, issue 46)."""
    checks = {
        "b": descriptor(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_b.py"]),
        "c": descriptor(["--version"], executable="imm-no-such-tool"),
    }
    world.create({"a": [], "b": [], "c": []}, "guard", checks=checks, files={"test_b.py": TEST_B})
    world.dispatch({"initiative": "guard"})
    world.run_dispatches()
    children = {c["task_id"]: c for c in world.state()["children"]}
    assert children["a"]["state"] == "integrated"
    assert children["b"]["state"] == "integrated"
    assert children["c"]["state"] == "needs_human"
    assert "batch_integration_check_failed" not in children["c"]["reason"]  # never landed
    findings = " ".join(f.get("error") or "" for f in children["c"].get("findings", []))
    assert "check_setup" in findings + str(children["c"].get("failures", ""))
