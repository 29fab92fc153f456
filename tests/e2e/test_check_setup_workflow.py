"""Without `check_setup`, checks that need what only setup installs fail at integration (issue 20,
ADR 0032): the check user cannot reach the runner's own tools (here: the pyenv Python under
root's 0700 home, which has pytest and runs the lanes' own checks), so the lanes park. The
same project lands with setup in the config: `test_isolated_integration.py`."""

from __future__ import annotations

from tests.conftest import descriptor
from tests.e2e.act_world import ActWorld

TEST_B = """\
import pathlib


def test_b_names_itself():
    assert pathlib.Path("b.txt").read_text() == "b\\n"
"""


def test_without_check_setup_a_check_needing_pytest_parks_its_lane_at_integration(
    world: ActWorld,
) -> None:
    checks = {"b": descriptor(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_b.py"])}
    world.create({"a": [], "b": []}, "guard", checks=checks, files={"test_b.py": TEST_B})
    world.dispatch({"initiative": "guard"})
    world.run_dispatches()
    children = {c["task_id"]: c for c in world.state()["children"]}
    assert children["a"]["state"] == "integrated"
    assert children["b"]["state"] == "needs_human"
    assert "batch_integration_check_failed" in children["b"]["reason"]
