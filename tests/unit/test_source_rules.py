"""Rules of the source that no linter we run checks for us."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "imm_action"


def test_no_assert_in_the_source() -> None:
    # `python -O` drops asserts: a rule that must hold is an explicit error (issue 9, item 5).
    found = [
        f"{path.relative_to(SOURCE)}:{node.lineno}"
        for path in sorted(SOURCE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert found == []
