"""`.ci/run` runs exactly the README's test command (non-negotiable 1, issue 46): the line a
newcomer pastes is the line CI gates on, so neither can drift from the other."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    after = lines.index("Install and run the tests (what `.ci/run` runs):")
    return next(line.strip() for line in lines[after + 1 :] if line.strip())


def test_the_readme_names_a_test_command_that_installs_and_runs_pytest() -> None:
    command = _readme_test_command()
    assert command.startswith("python3 -m venv .venv && ")
    assert "pip install" in command
    assert ".venv/bin/pytest" in command


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _readme_test_command() in [line.strip() for line in ci]
