"""The action's script hands imm the token in a 0600 file, never in the environment imm starts
with (issue 20, ADR 0033): what `/proc/<pid>/environ` of the step's process shows once it is imm
holds no token and no header. A stand-in for imm records what it was given."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

RUN_SH = Path(__file__).resolve().parents[2] / "action" / "run.sh"
TOKEN = "ghs_handoffSecretToken0123456789"

# What imm would see: its own environment block and the token file it was named.
STAND_IN = """\
import json, os, stat, sys
block = open("/proc/self/environ", "rb").read().decode()
name = os.environ.get("IMM_TOKEN_FILE", "")
status = os.stat(name) if name else None
json.dump({
    "argv": sys.argv[1:], "environ": block,
    "file_mode": stat.S_IMODE(status.st_mode) if status else None,
    "file": open(name).read() if name else None,
    "auth_base": os.environ.get("IMM_GIT_SERVER"),
}, open(os.environ["STAND_IN_OUT"], "w"))
"""


@pytest.mark.parametrize("command", ["reconcile", "command", "lane-fetch"])
def test_the_step_hands_imm_the_token_in_a_0600_file_and_never_in_its_environment(
    tmp_path: Path, command: str
) -> None:
    stand_in = tmp_path / "imm"
    stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stand_in.chmod(0o755)
    event = tmp_path / "event.json"
    event.write_text("{}")
    out = tmp_path / "seen.json"
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "RUNNER_TEMP": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "IMM_BIN": str(stand_in), "IMM_COMMAND": command, "IMM_TOKEN": TOKEN,
        "IMM_INITIATIVE": "init", "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "acme/shop", "STAND_IN_OUT": str(out),
    }  # fmt: skip
    done = subprocess.run(
        ["bash", str(RUN_SH)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(out.read_text())
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert TOKEN not in seen["environ"]
    assert basic not in seen["environ"]
    assert "GIT_CONFIG_VALUE_0" not in seen["environ"]
    assert (seen["file"], seen["file_mode"]) == (TOKEN, stat.S_IRUSR | stat.S_IWUSR)
    assert seen["auth_base"] == "https://github.com/"
    assert TOKEN not in json.dumps(seen["argv"])
