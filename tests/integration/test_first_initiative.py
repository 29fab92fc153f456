"""docs/first-initiative.md, run as written (issue 24 #12): every shell block, in order, in an
empty folder, with imm on PATH — the walkthrough must land its batch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_every_command_of_the_first_initiative_walkthrough_runs_and_lands_the_batch(
    tmp_path: Path,
) -> None:
    blocks = BLOCK.findall((ROOT / "docs/first-initiative.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    script = "set -euo pipefail\n" + "\n".join(blocks)
    home = tmp_path / "home"
    home.mkdir()
    environment = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home), "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1",
    }  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True,
        check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert ": completed — all 2 tasks integrated into imm/calc" in done.stdout  # imm status
    landed = subprocess.run(
        ["git", "log", "--format=%s", "main..imm/calc"], cwd=tmp_path / "calc",
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert landed[:2] == ["imm(sub): Subtract two numbers", "imm(add): Add two numbers"]
