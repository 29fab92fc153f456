"""README's Claude Code recipe, run as written with a stand-in `claude` on PATH that parses its
arguments as the real CLI does (tests/stand_ins/claude): issue 24 #3."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from imm_action.model.state import ChildState
from tests.batch_helpers import current, make_project
from tests.conftest import run_cli
from tests.integration.test_readme_snippets import yaml_blocks

STAND_INS = Path(__file__).resolve().parents[1] / "stand_ins"


def readme_recipe() -> dict[str, str]:
    (recipe,) = [b for b in yaml_blocks() if b.startswith("# .github/imm.yml")]
    loaded: dict[str, str] = YAML(typ="safe").load(recipe)
    return loaded


def readme_executor() -> str:
    return readme_recipe()["executor"]


@pytest.fixture
def claude_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{STAND_INS}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.usefixtures("claude_on_path")
def test_the_readmes_claude_recipe_lands_both_lanes_of_a_two_task_initiative(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the sandbox: the stand-in keeps its state under $HOME at start as the real CLI does,
    in the lane's own home, never the user's (issue 29)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    config = io.StringIO()
    YAML().dump({"executor": readme_executor()}, config)  # lane_setup would download Claude
    repo = make_project(
        tmp_path / "r", {"a": [], "b": ["a"]}, extra_files={".github/imm.yml": config.getvalue()}
    )
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo))
    assert code == 0, err
    assert [c.state for c in current(repo).state.children] == [ChildState.INTEGRATED] * 2
    assert "lane code runs in a bubblewrap sandbox" in err
    assert not (home / ".claude.json").exists()  # the lanes' homes were their own


def test_the_stand_in_swallows_a_prompt_placed_after_allowed_tools_as_the_real_cli_does(
    tmp_path: Path,
) -> None:
    """Why the recipe puts no prompt there: the old README's line failed every lane."""
    done = subprocess.run(
        [str(STAND_INS / "claude"), "-p", "--allowedTools", "Read,Edit", "Do the task"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 1
    assert "Input must be provided either through stdin or as a prompt argument" in done.stderr


def test_the_stand_in_takes_its_prompt_from_stdin_or_a_positional_argument(
    tmp_path: Path,
) -> None:
    prompt = "# Task t\n\n## Scope\n\n- `t.txt`\n\n## Acceptance\n"
    for argv, stdin in ((["-p"], prompt), (["-p", prompt, "--allowedTools", "Read"], "")):
        (tmp_path / "t.txt").unlink(missing_ok=True)
        done = subprocess.run(
            [str(STAND_INS / "claude"), *argv], cwd=tmp_path, input=stdin,
            capture_output=True, text=True, check=False, env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "t.txt").read_text() == "t\n"


def test_the_recipes_install_step_fails_where_the_download_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30 #5: with `curl … | bash` and no pipefail, a failed download let the setup pass
    and the lane fail later as `cannot start claude`."""
    monkeypatch.setenv("PATH", f"{STAND_INS / 'failing_curl'}{os.pathsep}{os.environ['PATH']}")
    recipe = readme_recipe()
    config = io.StringIO()
    YAML().dump({"executor": recipe["executor"], "lane_setup": recipe["lane_setup"]}, config)
    repo = make_project(
        tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config.getvalue()}
    )
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo))
    assert code == 1, err
    (child,) = current(repo).state.children
    assert child.reason is not None
    assert "lane_setup" in child.reason
    assert "cannot start" not in child.reason
    (failure,) = child.failures
    assert failure.step == "lane_setup"
    assert "curl: (22) The requested URL returned error: 503" in failure.output_tail
    assert "curl: (22)" in out  # the report shows the setup step's last lines


def test_imm_inits_recipe_comment_is_the_readmes_recipe() -> None:
    """Issue 30 #6: the config `imm init` writes shows the same recipe as README, word for word."""
    template = Path(__file__).resolve().parents[2] / "src/imm_action/scaffold/templates/imm.yml"
    commented = {
        line.removeprefix("# ").split(":", 1)[0]: line.removeprefix("# ").split(":", 1)[1].strip()
        for line in template.read_text().splitlines()
        if line.startswith(("# executor:", "# lane_setup:"))
    }
    recipe = readme_recipe()
    assert commented == {"executor": recipe["executor"], "lane_setup": recipe["lane_setup"]}
