"""What README and the reference pages it links (docs/) show, a new user copies (issue 24 #1,
issue 30 #7): their YAML blocks parse, the workflow lints clean with actionlint as a file of its
own, the config is a config imm accepts, and every command they show is one imm has."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from imm_action.demo.project import TASKS
from imm_action.model.config import RepoConfig
from tests.integration.test_workflow_files import _tool

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
# README and the reference it links: what a person reads before using imm
PAGES = ("README.md", "docs/commands.md", "docs/github.md", "docs/how-it-works.md",
         "docs/formats.md", "docs/figures.md", "docs/first-initiative.md")  # fmt: skip


def pages_text() -> str:
    return "\n".join((ROOT / page).read_text(encoding="utf-8") for page in PAGES)


def yaml_blocks() -> list[str]:
    return BLOCK.findall(pages_text())


def test_readme_links_every_reference_page_and_reads_in_five_minutes() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"]({page})" in readme, f"README does not link {page}"
    assert len(readme.split()) <= 1200  # about five minutes at a reading pace


def test_readme_has_yaml_blocks() -> None:
    assert len(yaml_blocks()) >= 2


@pytest.mark.parametrize("block", yaml_blocks(), ids=lambda b: b.splitlines()[0][:40])
def test_every_yaml_block_of_the_readme_parses(block: str) -> None:
    assert isinstance(YAML(typ="safe").load(block), dict)


def test_the_readmes_workflow_lints_clean_as_a_file_of_its_own(tmp_path: Path) -> None:
    (workflow,) = [b for b in yaml_blocks() if b.startswith("on:")]
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    (folder / "imm-batch.yml").write_text(workflow, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    done = subprocess.run(
        [_tool("actionlint"), "-no-color"], cwd=tmp_path, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readmes_config_is_one_imm_accepts() -> None:
    (config,) = [b for b in yaml_blocks() if b.startswith("# .github/imm.yml")]
    RepoConfig.model_validate(YAML(typ="safe").load(config))


def test_the_readme_describes_the_demo_as_it_is() -> None:
    """Issue 24 #10: the tasks and levels README promises are the demo's."""
    words = {5: "five", 6: "six", 7: "seven", 8: "eight"}
    level: dict[str, int] = {}
    for task, (needs, _, _) in TASKS.items():  # listed after what they need
        level[task] = 1 + max((level[need] for need in needs), default=0)
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    depth = max(level.values())
    assert f"{words[len(TASKS)]} tasks {words[depth]} levels deep" in text


COMMAND = re.compile(r"(?:`|^ {4})(?:\.venv/bin/)?(imm [a-z][^`\n]*)", re.MULTILINE)


def readme_commands() -> list[str]:
    return sorted({found.strip() for found in COMMAND.findall(pages_text())})


def _help(subcommand: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", subcommand, "--help"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"README shows `imm {subcommand}`, which imm does not know"
    return done.stdout


def test_every_command_the_readme_shows_names_a_subcommand_and_options_imm_has() -> None:
    """Issue 24: README's commands are checked against `--help`."""
    commands = readme_commands()
    assert len(commands) > 10
    helps: dict[str, str] = {}
    for command in commands:
        words = command.replace("|", " ").replace("[", " ").replace("]", " ").split()
        subcommand = words[1]
        if subcommand.startswith("<"):
            continue
        text = helps.setdefault(subcommand, _help(subcommand))
        for option in (word.split("=")[0] for word in words if word.startswith("--")):
            assert option in text, f"README: `{command}` — `imm {subcommand}` has no {option}"
