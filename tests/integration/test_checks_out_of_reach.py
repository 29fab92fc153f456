"""A lane's code, run by its check in the lane and again at integration, cannot reach imm's own
secrets (issue 20): every attack is really made, by a probe the lane wrote, from where checks run
under `imm run`."""

from __future__ import annotations

import ast
import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, git
from tests.git_http_remote import GitHttpRemote, auth_header
from tests.isolation_probe import running_with

HOST_TOKEN = "ghs_" + "H" * 36
ATTACKER = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "attack_executor.py")]
)


def _spied_run(tmp_path: Path, out: Path, env: dict[str, str]) -> tuple[Path, Path, int]:
    """`imm run` of `spy` (its check runs the probe, writing into `out`: a folder any user can
    reach, since an integration check may run as another user, ADR 0031) and `plain`, with
    `env` added; the repository, `out` and the pid of `imm run`."""
    repo = make_project(
        tmp_path / "r",
        {"spy": [], "plain": []},
        scopes={"spy": ["spy.txt", "probe.py"]},
        checks={"spy": descriptor(["probe.py"])},
    )
    (out / "attack.json").write_text(json.dumps({"targets": []}))
    argv = [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo)]
    process = subprocess.Popen(
        [*argv, "--executor", ATTACKER],
        env={**os.environ, "IMM_TEST_DIR": str(out), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=180)
    assert process.returncode == 0, output
    return repo, out, process.pid


def test_a_lanes_check_finds_no_token_imm_run_was_given_by_hand_in_any_process(
    tmp_path: Path, open_dir: Path
) -> None:
    """`imm run` by hand, with tokens in its environment: the lane's own check and the
    integrator's, in the sandbox, read every /proc environ and cmdline they can."""
    secrets = {name: f"secret-{name.lower()}-{uuid.uuid4().hex}" for name in (
        "GITHUB_TOKEN", "IMM_TOKEN", "GH_TOKEN", "INPUT_GITHUB_TOKEN",
    )}  # fmt: skip
    canary = f"canary-{uuid.uuid4().hex}"  # no secret: proves the probe read imm's processes
    repo, out, _ = _spied_run(tmp_path, open_dir, {**secrets, "IMM_CANARY": canary})
    assert {c.task_id: str(c.state) for c in current(repo).state.children} == {
        "spy": "integrated",
        "plain": "integrated",
    }
    runs = sorted(out.glob("collected-*"))
    assert len(runs) >= 2  # the lane's own check, and the integrator's
    everything = b"".join(run.read_bytes() for run in runs)
    for value in secrets.values():
        assert value.encode() not in everything
    readable = {
        (pid, part)
        for run in out.glob("read-*")
        for pid, part in json.loads(run.read_text())["readable"]
    }
    assert readable  # the probe read what it could: its own processes
    # imm's environment holds the canary, and root reads every process it can see: in the
    # sandbox's PID namespace it sees none of imm's
    assert canary.encode() not in everything


def test_no_process_a_lanes_check_leaves_outlives_imm_run(tmp_path: Path, open_dir: Path) -> None:
    _, out, _ = _spied_run(tmp_path, open_dir, {})
    assert len(list(out.glob("left-*"))) >= 2  # the lane's own check, the integrator's
    assert not running_with(f"left-by-{out}".encode())


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "IMM_TOKEN", "INPUT_GITHUB_TOKEN"])
def test_a_token_given_by_hand_leaves_the_environment_block_proc_shows(name: str) -> None:
    """The value is zeroed in the block /proc/<pid>/environ shows and gone from os.environ;
    imm holds it in memory (GITHUB_TOKEN, INPUT_GITHUB_TOKEN: the ones it acts with)."""
    script = (
        "import ctypes, os, sys; from imm_action import credentials; "
        "credentials.take_credentials(own_process=True); "
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)); "
        "print(os.environ.get(sys.argv[1])); print(open('/proc/self/environ', 'rb').read()); "
        "print(credentials.token() or '')"
    )
    value = f"secret-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    done = subprocess.run(
        [sys.executable, "-c", script, name],
        env={**env, name: value},
        capture_output=True,
        text=True,
        check=True,
    )
    dumpable, in_environ, block, held = done.stdout.splitlines()
    assert (dumpable, in_environ) == ("0", "None")
    assert value not in block
    assert f"{name}=".encode() in ast.literal_eval(block)  # the name stays, its value is gone
    assert held == ("" if name == "IMM_TOKEN" else value)


def test_a_network_git_command_gets_the_header_from_a_file_never_its_environment(
    tmp_path: Path,
) -> None:
    """A stand-in `git` first on PATH records its environment and arguments, then runs git:
    the push reaches a host that requires the token, and nothing git was given holds it."""
    with GitHttpRemote(tmp_path / "host", token=HOST_TOKEN) as host:
        bare = host.create_repository("project")
        repo = make_project(tmp_path / "r", {"a": []})
        url = host.url("project")
        git(repo, "remote", "add", "origin", url)
        git(repo, "-c", f"http.{url}.extraheader={auth_header(HOST_TOKEN)}", "push", "-q",
            "origin", "HEAD:refs/heads/main")  # fmt: skip
        shims, seen = tmp_path / "shims", tmp_path / "seen"
        shims.mkdir()
        seen.mkdir()
        real = shutil.which("git")
        (shims / "git").write_text(
            f"#!{sys.executable}\nimport json, os, sys, uuid\n"
            f"open({str(seen)!r} + f'/{{uuid.uuid4()}}.json', 'w').write(json.dumps("
            "{'argv': sys.argv, 'environ': open('/proc/self/environ', 'rb').read().decode()}))\n"
            f"os.execv({real!r}, ['git', *sys.argv[1:]])\n"
        )
        (shims / "git").chmod(0o755)
        token_file = tmp_path / "token"
        token_file.write_text(HOST_TOKEN)
        env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
        done = subprocess.run(
            [sys.executable, "-m", "imm_action", "reconcile", "init", "--admit", "--repo",
             str(repo), "--remote", "origin"],
            env={**env, "PATH": f"{shims}{os.pathsep}{env['PATH']}",
                 "IMM_TOKEN_FILE": str(token_file), "IMM_GIT_SERVER": url.rsplit("/", 1)[0] + "/"},
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        pushed = subprocess.run(["git", "-C", str(bare), "for-each-ref", "refs/heads/imm"],
                                capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert "refs/heads/imm/init" in pushed  # the token reached the host
    calls = [json.loads(path.read_text()) for path in seen.iterdir()]
    network = [c for c in calls if {"push", "fetch", "ls-remote"} & set(c["argv"])]
    assert network
    basic = base64.b64encode(f"x-access-token:{HOST_TOKEN}".encode()).decode()
    for call in calls:
        assert HOST_TOKEN not in json.dumps(call)
        assert basic not in json.dumps(call)
