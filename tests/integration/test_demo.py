"""`imm demo`: the Quick start's first command ends with a completed batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git, run_cli


def test_the_demo_completes_its_batch_with_one_qa_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = tmp_path / "demo"
    code, out, _ = run_cli(capsys, "demo", "--dir", str(demo))
    assert code == 0
    assert "git log --graph imm/shop:" in out
    code, out, _ = run_cli(capsys, "status", "--repo", str(demo), "--format", "json")
    report = json.loads(out)
    assert (code, report["batch_state"]) == (0, "completed")
    retried = {c["task_id"]: c["qa_failures"] for c in report["children"]}
    assert retried["cart"] == 1
    assert len(report["children"]) == 7
    assert git(demo, "status", "--porcelain") == ""
    assert 'PARTS.append("catalog")' in git(demo, "show", "imm/shop:src/shop/registry.py")


def test_the_demo_refuses_a_folder_that_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, _, err = run_cli(capsys, "demo", "--dir", str(tmp_path))
    assert code == 2
    assert "not empty" in err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
