"""The committed JSON Schemas under docs/schema are exactly what the models generate."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.commands.schema import schema_text
from imm_action.model import SCHEMA_MODELS

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_matches_the_model(name: str) -> None:
    committed = SCHEMA_DIR / f"{name}.json"
    how = f"docs/schema/{name}.json is out of date; regenerate with: imm schema --write docs/schema"
    assert committed.is_file(), how
    assert committed.read_text(encoding="utf-8") == schema_text(name), how
