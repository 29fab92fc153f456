"""The committed JSON Schemas under docs/schema are exactly what the models generate."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.commands.schema import schema_text
from imm_action.model.schemas import SCHEMA_MODELS
from tests.conftest import run_cli

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_matches_the_model(name: str) -> None:
    committed = SCHEMA_DIR / f"{name}.json"
    how = f"docs/schema/{name}.json is out of date; regenerate with: imm schema --write docs/schema"
    assert committed.is_file(), how
    assert committed.read_text(encoding="utf-8") == schema_text(name), how


def test_schema_write_into_a_file_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "config.json"
    target.write_text("mine\n")
    code, _, err = run_cli(capsys, "schema", "config", "--write", str(target))
    assert code == 2
    assert f"--write takes a folder: {target} is a file" in err
    assert target.read_text() == "mine\n"
