"""imm takes its token from a file it reads once and removes, never from an environment
(ADR 0033): what /proc shows of any process — imm's, git's, a check's — never holds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.batch_helpers import make_project, work
from tests.conftest import descriptor

TOKEN = "ghs_" + "T" * 36

# Reads every environment and command line it can (as root here: all of them) while imm runs.
SPY = (
    "import glob, pathlib, sys; seen = ''\n"
    "for p in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline'):\n"
    "    try: seen += pathlib.Path(p).read_bytes().decode('latin-1')\n"
    "    except OSError: pass\n"
    "pathlib.Path(sys.argv[1]).write_text(seen)\n"
)


def test_the_token_is_read_from_its_file_once_and_is_in_no_processs_environment(
    tmp_path: Path,
) -> None:
    seen = tmp_path / "seen.txt"
    config = "integration_isolation: none\n"  # the defence that holds without isolation
    repo = make_project(
        tmp_path / "r", {"a": []}, checks={"a": descriptor(["spy.py", str(seen)])},
        scopes={"a": ["a.txt", "spy.py"]}, extra_files={".github/imm.yml": config},
    )  # fmt: skip
    token_file = tmp_path / "token"

    def imm(*args: str) -> subprocess.CompletedProcess[str]:
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
        return subprocess.run(
            [sys.executable, "-m", "imm_action", *args, "--repo", str(repo)],
            env={**env, "IMM_TOKEN_FILE": str(token_file)},
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    assert imm("reconcile", "init", "--admit").returncode == 0
    assert not token_file.exists()  # read once, removed
    work(repo, "a", {"a.txt": "a\n", "spy.py": SPY})
    landed = imm("reconcile", "init")
    assert landed.returncode == 0, landed.stderr
    assert seen.read_text()  # it read something
    assert TOKEN not in seen.read_text()
    assert not token_file.exists()


def test_a_token_file_imm_cannot_read_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "status", "x", "--repo", str(tmp_path)],
        env={**os.environ, "IMM_TOKEN_FILE": str(missing)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"cannot read the token file {missing}" in done.stderr


def test_a_process_holding_the_token_is_not_dumpable(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    probe = (
        "import ctypes, json, os\n"
        "from imm_action import credentials\n"
        "credentials.take_credentials()\n"
        "dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
        "print(json.dumps([dumpable, credentials.token(), 'GITHUB_TOKEN' in os.environ]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "IMM_TOKEN_FILE": str(token_file)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == [0, TOKEN, False]


def test_the_git_header_is_scoped_to_the_server_and_given_only_with_a_token(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    probe = (
        "import json, os\n"
        "from imm_action import credentials\n"
        "credentials.take_credentials()\n"
        "held = [credentials.git_auth(), list(credentials.held_secrets())]\n"
        "credentials.take_credentials()\n"  # a later command without a file holds nothing
        "print(json.dumps([*held, credentials.git_auth()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "IMM_TOKEN_FILE": str(token_file),
             "IMM_GIT_SERVER": "https://github.example/"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    auth, secrets, later = json.loads(done.stdout)
    assert auth["GIT_CONFIG_KEY_0"] == "http.https://github.example/.extraheader"
    assert auth["GIT_CONFIG_VALUE_0"].startswith("AUTHORIZATION: basic ")
    assert TOKEN in secrets
    assert later == {}
