"""Dependencies point one way (face → orchestration → domain → infrastructure): the layers
contract in pyproject.toml holds for the source, and it catches an import that points up."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(source: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the `imm_action` package under `source`, with `config`'s contracts."""
    code = (
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"
    )
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(config), "--no-cache"],
        cwd=config.parent, env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_source_keeps_the_layers_contract() -> None:
    result = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("model/refs.py", "imm_action.integrate.store"),  # a format reaching into the pass
        ("git/refs.py", "imm_action.passes.driver"),  # infrastructure reaching up
        ("local/coordinator.py", "imm_action.commands.lane"),  # the old cycle
    ],
)
def test_an_import_pointing_up_breaks_the_contract(
    tmp_path: Path, module: str, upward: str
) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "imm_action", source / "imm_action")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = source / "imm_action" / module
    target.write_text(target.read_text() + f"\nimport {upward}  # noqa\n")
    result = lint_imports(source, tmp_path / "pyproject.toml")
    assert result.returncode != 0
    assert f"-> {upward}" in result.stdout


def test_every_module_of_the_package_has_a_layer() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = config["tool"]["importlinter"]["contracts"][0]  # the package's layers
    layered = {
        name.strip().removeprefix("imm_action.")
        for layer in contract["layers"]
        for name in layer.split("|")
    }
    package = ROOT / "src" / "imm_action"
    modules = {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert modules - layered == set()  # a module outside the contract escapes it


def test_every_part_of_the_git_room_has_a_layer() -> None:
    """Issue 46: `git/repo.py` split into parts, each built on the one below."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if "git:" in c["name"]]
    parts = {name.removeprefix("imm_action.git.") for name in contract["layers"]}
    assert parts == {"repo", "work_trees", "ref_access", "writing", "reading", "repo_base",
                     "objects"}  # fmt: skip


def test_a_git_part_reaching_up_breaks_the_contract(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "imm_action", source / "imm_action")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = source / "imm_action" / "git" / "reading.py"
    target.write_text(target.read_text() + "\nimport imm_action.git.ref_access  # noqa\n")
    result = lint_imports(source, tmp_path / "pyproject.toml")
    assert result.returncode != 0
    assert "-> imm_action.git.ref_access" in result.stdout
