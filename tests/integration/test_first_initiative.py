"""README's Quick start and docs/first-initiative.md, run as written from a fresh clone (issue
24 #12, issue 30 #6): the Quick start's line installs imm and runs the demo; then every shell
block of the walkthrough, in order, in the clone's folder, with imm reached as the page says —
the walkthrough must land its batch."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
QUICK_START = re.compile(r"^    (python3 -m venv \.venv && .*imm demo)$", re.MULTILINE)


@pytest.mark.slow
def test_the_quick_start_and_the_walkthrough_run_as_written_from_a_fresh_clone(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "imm-action"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    # a person's shell: no virtual environment of ours on PATH; pip's cache is theirs too
    path = os.pathsep.join(
        part for part in os.environ["PATH"].split(os.pathsep) if ".venv" not in part
    )
    environment = {
        "PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1",
        "TMPDIR": str(tmp_path), "PIP_CACHE_DIR": _pip_cache(),
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_") and k != "PIP_CACHE_DIR"},
    }  # fmt: skip
    (quick_start,) = QUICK_START.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    demo = subprocess.run(
        ["bash", "-c", quick_start], cwd=clone, env=environment, capture_output=True,
        text=True, check=False, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "completed" in demo.stdout
    blocks = BLOCK.findall((clone / "docs/first-initiative.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    script = "set -euo pipefail\n" + "\n".join(blocks) + "\npwd\n"
    done = subprocess.run(
        ["bash", "-c", script], cwd=clone, env=environment, capture_output=True, text=True,
        check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ": completed — all 2 tasks integrated into imm/calc" in done.stdout  # imm status
    calc = Path(done.stdout.splitlines()[-1])
    landed = subprocess.run(
        ["git", "log", "--format=%s", "main..imm/calc"], cwd=calc,
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert landed[:2] == ["imm(sub): Subtract two numbers", "imm(add): Add two numbers"]


def _pip_cache() -> str:
    """Where this machine's pip keeps what it downloaded (the test extra was just installed):
    the clone's install takes the same wheels from there."""
    found = subprocess.run(
        ["python3", "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() or str(Path.home() / ".cache" / "pip")
