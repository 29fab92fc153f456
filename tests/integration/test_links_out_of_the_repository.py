"""Links out of the repository, however they are chained, never land (issue 21 #3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imm_action.model.state import ChildState
from tests.batch_helpers import current, make_project, run_pass, work
from tests.conftest import descriptor, git, run_cli
from tests.integration.test_local_run import EXECUTOR

CHAINS = {
    "a link through a link to the root": "out/r=..,out/leak=r/out/r/out/../../../etc/passwd",
    "a link into .git through another": "out/d=../.git,out/g=d/config",
    "a loop": "out/p=q,out/q=p",
}


@pytest.mark.parametrize("chain", list(CHAINS.values()), ids=list(CHAINS))
def test_a_chain_of_links_leaving_the_repository_is_parked_and_lands_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chain: str
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": f"links:{chain}"}))
    repo = make_project(tmp_path / "r", {"a": []}, scopes={"a": ["out/**", "a.txt"]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 1, err
    child = current(repo).state.children[0]
    assert child.state is ChildState.NEEDS_HUMAN
    assert (child.reason or "").startswith("lane_symlink_outside: out/")
    assert git(repo, "diff", "--name-only", "main", "imm/init") == ""


def test_at_integration_a_new_link_that_makes_a_landed_one_leave_is_parked(
    tmp_path: Path,
) -> None:
    """Lane a's link stays inside on its own and lands; lane b adds `out/r -> ..`, after which
    a's link climbs out: the integrator resolves every link of b's candidate again."""
    repo = make_project(
        tmp_path / "r", {"a": [], "b": []},
        scopes={"a": ["out/leak", "a.txt"], "b": ["out/r", "b.txt"]},
        checks={"a": descriptor(["-c", "pass"]), "b": descriptor(["-c", "pass"])},
    )  # fmt: skip
    run_pass(repo)
    work(repo, "a", {}, links={"out/leak": "r/out/r/out/../../../etc/passwd"})
    work(repo, "b", {}, links={"out/r": ".."})
    run_pass(repo)
    states = {c.task_id: (c.state, c.reason) for c in current(repo).state.children}
    assert states["a"][0] is ChildState.INTEGRATED, states
    assert states["b"] == (ChildState.NEEDS_HUMAN, "lane_symlink_outside: out/leak")
    assert "out/r" not in git(repo, "ls-tree", "-r", "--name-only", "imm/init").split()
