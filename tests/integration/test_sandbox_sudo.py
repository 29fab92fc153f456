"""The sandbox's sudo path (issue 29, ADR 0048): where the kernel lets no unprivileged user
make namespaces (GitHub's hosted Ubuntu 24.04 runners, through AppArmor), imm makes them through
passwordless sudo, and lane code runs as imm's own user with no capability. Here an ordinary
user with a setuid stand-in for `sudo -n` (tests/sudo_standin.c) runs `imm run` holding a token,
with `sandbox: sudo`; the lane's executor and checks attack as in test_sandbox.py."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor
from tests.integration.test_sandbox import TOKEN, _namespaces_work
from tests.isolation_probe import running_with

pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="the kernel refuses namespaces")
PROBE_SOURCE = Path(__file__).resolve().parents[1] / "sandbox_probe.py"


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


SUDO_TESTER = "imm-sudo-tester"


def _interpreter_for(uid: int, gid: int, path: str) -> str | None:
    """A Python of this version that `uid` can run with imm on PYTHONPATH: this one, or the
    system's (a pyenv Python under root's 0700 home is out of another user's reach)."""
    for candidate in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        tried = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", candidate, "-c",
             f"import sys, pydantic; sys.exit(sys.version_info[:2] != {sys.version_info[:2]})"],
            env={"PYTHONPATH": path}, capture_output=True, check=False,
        )  # fmt: skip
        if tried.returncode == 0:
            return candidate
    return None


def _imm_for_any_user(into: Path) -> Path:
    """imm and its runtime dependencies (the closure of imm-action's requirements, no extras),
    copied into `into` (0755), which it returns: the checkout and its venv may lie under a
    folder only their owner can pass (a `mktemp -d` clone, root's home)."""
    into.mkdir(mode=0o755)
    shutil.copytree(Path(__file__).resolve().parents[2] / "src" / "imm_action",
                    into / "imm_action", ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    wanted, seen = ["imm-action"], set()
    while wanted:
        name = canonicalize_name(wanted.pop())
        if name in seen:
            continue
        seen.add(name)
        distribution = metadata.distribution(name)
        for requirement in map(Requirement, distribution.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
        if name == "imm-action":
            continue
        for file in distribution.files or []:
            found = Path(str(distribution.locate_file(file)))
            if ".." not in file.parts and found.is_file():
                (into / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(found, into / file)
    for folder, _, _ in os.walk(into):
        os.chmod(folder, 0o755)
    return into


@pytest.fixture
def sudo_runner() -> Iterator[tuple[int, int, Path]]:
    """An ordinary user with passwordless sudo, as on GitHub's hosted runners: a user of its
    own and a setuid stand-in for `sudo -n` (this machine has no sudo) in a folder only that
    user can reach, removed after the test."""
    if os.geteuid() != 0 or shutil.which("cc") is None:
        pytest.skip("needs root and a C compiler to stand in for sudo")
    if subprocess.run(["id", "-u", SUDO_TESTER], capture_output=True, check=False).returncode:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", SUDO_TESTER], check=True)  # fmt: skip
    entry = pwd.getpwnam(SUDO_TESTER)
    # apart from open_dir, which the test hands to that user (a chown drops the setuid bit)
    tools = Path(tempfile.mkdtemp(prefix="imm-test-sudo-"))
    tools.chmod(0o750)
    os.chown(tools, 0, entry.pw_gid)
    source = Path(__file__).resolve().parents[1] / "sudo_standin.c"
    subprocess.run(["cc", "-O", "-o", str(tools / "sudo"), str(source)], check=True)
    (tools / "sudo").chmod(0o4755)
    try:
        yield entry.pw_uid, entry.pw_gid, tools
    finally:
        shutil.rmtree(tools)
        shutil.rmtree(tools.with_name(tools.name + "-imm"), ignore_errors=True)


def test_through_sudo_lane_code_runs_as_imms_user_and_finds_no_token_key_or_other_tree(
    sudo_runner: tuple[int, int, Path],
) -> None:
    uid, gid, tools = sudo_runner
    imm_path = str(_imm_for_any_user(tools.with_name(tools.name + "-imm")))
    python = _interpreter_for(uid, gid, imm_path)
    if python is None:
        pytest.skip("no Python of this version that another user can run")
    root = Path(tempfile.mkdtemp(prefix="imm-test-sudo-run-"))
    try:
        home, out = root / "home", root / "out"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-SUDO")
        out.mkdir()
        shutil.copy(PROBE_SOURCE, root / "probe_executor.py")
        # spy after plain: had plain landed second, spy's check would be owed again on plain's
        # move (all the branch holds) and run a third time, by which lane happened to end first
        repo = make_project(
            root / "r", {"spy": ["plain"], "plain": []}, scopes={"spy": ["spy.txt", "probe.py"]},
            checks={"spy": descriptor(["probe.py"])},
            extra_files={".github/imm.yml": "sandbox: sudo\n"},
        )  # fmt: skip
        tag = uuid.uuid4().hex
        (out / "attack.json").write_text(json.dumps(
            {"token": TOKEN, "ssh_key": str(home / ".ssh" / "id_ed25519"), "repo": str(repo),
             "tag": tag}
        ))  # fmt: skip
        _chown_tree(root, uid, gid)
        os.chmod(root, 0o755)
        executor = shlex.join([python, str(root / "probe_executor.py")])
        done = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-m",
             "imm_action", "run", "init", "--repo", str(repo), "--executor", executor],
            env={"PATH": f"{Path(python).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
                 "PYTHONPATH": imm_path, "HOME": str(home), "GITHUB_TOKEN": TOKEN,
                 "IMM_SUDO": str(tools / "sudo"), "IMM_TEST_DIR": str(out),
                 "IMM_EXECUTOR_ENV": "IMM_TEST_DIR", "IMM_SANDBOX_WRITABLE": str(root),
                 "GIT_CONFIG_GLOBAL": "/dev/null",
                 "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                 "GIT_COMMITTER_EMAIL": "t@t"},
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        _chown_tree(root, 0, 0)
        output = done.stdout + done.stderr
        assert "namespaces made through sudo" in output
        assert done.returncode == 0, output
        assert [str(c.state) for c in current(repo).state.children] == ["integrated"] * 2
        found = [json.loads(p.read_text()) for p in out.glob("found-*.json")]
        assert sorted(f["role"] for f in found) == ["check", "check", "executor"]
        for run in found:
            assert run["token_in"] == [], run
            assert run["ssh_key"] in (None, ""), run
            assert run["trees_written"] == [], run
            assert run["processes"] <= 5, run
        assert running_with(f"left-by-{out}".encode()) == []
        assert not os.path.lexists(f"/tmp/imm-plant-{tag}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
