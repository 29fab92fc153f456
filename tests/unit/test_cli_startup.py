"""`imm --version` and `imm --help` load no model: pydantic's import is most of a cold start
(ADR 0003). Timing lives in benchmarks; these tests hold what makes it fast."""

from __future__ import annotations

import subprocess
import sys

import pytest

from imm_action.cli_parser import SCHEMA_NAMES
from imm_action.model.schemas import SCHEMA_MODELS


def test_the_cli_offers_every_schema_the_models_have() -> None:
    assert tuple(sorted(SCHEMA_MODELS)) == SCHEMA_NAMES


def _modules_loaded_by(*argv: str) -> set[str]:
    code = (
        "import sys\nfrom imm_action.cli import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(done.stderr.split())


def test_imm_version_loads_neither_pydantic_nor_any_model() -> None:
    loaded = _modules_loaded_by("--version")
    assert "pydantic" not in loaded
    assert not {name for name in loaded if name.startswith("imm_action.model")}


def test_imm_help_loads_neither_pydantic_nor_any_model() -> None:
    loaded = _modules_loaded_by("--help")
    assert "pydantic" not in loaded


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("lane", ["lane", "--batch-id", "b", "--task", "t", "--phase", "work"]),
        ("verify", ["verify", "--batch-id", "b", "--shard", "1"]),
        ("status", ["status", "s"]),
    ],
)
def test_the_commands_that_run_no_pass_load_neither_the_pass_nor_pygithub(
    command: str, argv: list[str]
) -> None:
    # A GitHub job runs a dozen of these: the pass and its decisions would add about 40 ms of
    # import to each, PyGithub about 220 ms (ADR 0064).
    loaded = _modules_loaded_by(*argv, "--repo", "/nonexistent")
    assert f"imm_action.commands.{command}" in loaded  # its handler ran
    assert not loaded & {"imm_action.passes.observe", "imm_action.integrate.decide", "github"}
