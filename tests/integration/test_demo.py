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


def test_the_demo_shows_a_retry_and_ends_with_commands_that_run_in_a_fresh_shell(
    tmp_path: Path,
) -> None:
    import os
    import shutil
    import subprocess
    import sys

    script = Path(sys.executable).parent / "imm"
    if not script.is_file():
        pytest.skip("imm is not installed as a console script next to this interpreter")
    demo = tmp_path / "demo"
    # As a person with the virtual environment activated: `imm` found on PATH by its bare name.
    activated = {**os.environ, "PATH": f"{script.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["imm", "demo", "--dir", str(demo)],
        env=activated, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "cart       integrated" in out
    assert "(passed on attempt 2)" in out
    assert "The QA loop: cart failed its check on attempt 1" in out
    assert "| AssertionError: 1240 != 1320" in out
    hints = out.split("each line runs as printed):\n")[1].splitlines()
    assert len(hints) == 3
    # A fresh shell: no virtual environment, nothing of ours on PATH, a clean environment.
    fresh = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    bash = shutil.which("bash") or "/bin/sh"
    for hint in hints:
        ran = subprocess.run(
            [bash, "-c", hint.strip()], env=fresh, cwd="/", capture_output=True, text=True,
            check=False, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, (hint, ran.stderr)
        assert ran.stdout.strip(), hint
