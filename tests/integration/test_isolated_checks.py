"""Integration checks run code a lane wrote, where imm's credentials are not (SPEC §8, ADR
0031): as another user, in a PID namespace of their own. A lane's check attacks everything it
can reach from there; nothing it finds is the token and nothing it writes changes what imm
does next. These tests need root or passwordless sudo (CI runs as root)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from imm_action.verify.isolation import check_user, chown_tree
from tests.batch_helpers import current, make_project, work
from tests.conftest import descriptor
from tests.isolation_probe import PROBE, SLEEPER, findings, running_with

pytestmark = pytest.mark.skipif(check_user() is None, reason="needs root or passwordless sudo")

TOKEN = "ghs_" + "Q" * 36  # what imm holds: never in anything a check can read


def _imm(repo: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`imm` as its own process, holding a token in its environment as the integrate job's
    step does."""
    return subprocess.run(
        [sys.executable, "-m", "imm_action", *args, "--repo", str(repo)],
        env={**os.environ, "HOME": str(home), "GITHUB_TOKEN": TOKEN, "IMM_TOKEN": TOKEN, **env},
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def _attacked_project(open_dir: Path) -> tuple[Path, Path, Path, list[str]]:
    """A repository whose task `a` ships an attack its own check runs; imm's home, the
    repository and the runner's files lie where another user could reach them, as on a
    runner (0755 folders owned by imm's user)."""
    home, evidence = open_dir / "home", open_dir / "evidence"
    home.mkdir(mode=0o755)
    evidence.mkdir(mode=0o777)
    evidence.chmod(0o777)
    github_env, github_path = open_dir / "github_env", open_dir / "github_path"
    for file in (github_env, github_path, home / ".gitconfig"):
        file.write_text("")
    repo = open_dir / "repo"
    targets = [str(home / ".gitconfig"), str(repo / ".git" / "config"), str(github_env),
               str(github_path), str(Path(sys.prefix) / "bin" / "activate")]  # fmt: skip
    # it pushes to the repository itself: the only remote a check could find
    check = descriptor(["attack.py", str(evidence), json.dumps(targets), str(repo)])
    make_project(repo, {"a": []}, checks={"a": check}, scopes={"a": ["a.txt", "attack.py"]})
    for folder in (open_dir, repo):
        folder.chmod(0o755)
    return repo, home, evidence, targets


def test_a_lanes_check_at_integration_finds_no_token_and_changes_nothing_imm_uses(
    open_dir: Path,
) -> None:
    repo, home, evidence, targets = _attacked_project(open_dir)
    admitted = _imm(repo, home, "reconcile", "init", "--admit")
    assert admitted.returncode == 0, admitted.stderr
    before = {target: Path(target).read_bytes() for target in targets}
    work(repo, "a", {"a.txt": "a\n", "attack.py": PROBE})
    landed = _imm(repo, home, "reconcile", "init")
    assert "integration checks run as user imm-check" in landed.stderr
    assert landed.returncode == 0, landed.stderr
    found = findings(evidence)
    assert found["uid"] != os.getuid()
    assert TOKEN not in found["read"]
    assert found["wrote"] == []
    assert not found["pushed"]
    for target, content in before.items():
        assert Path(target).read_bytes() == content, target
    assert running_with(SLEEPER) == []  # the namespace ended with the check
    assert [c.state for c in current(repo).state.children] == ["integrated"]


def test_an_isolated_check_sees_no_process_but_its_own(open_dir: Path) -> None:
    repo, home, evidence, _ = _attacked_project(open_dir)
    assert _imm(repo, home, "reconcile", "init", "--admit").returncode == 0
    work(repo, "a", {"a.txt": "a\n", "attack.py": PROBE})
    assert _imm(repo, home, "reconcile", "init").returncode == 0
    # its own namespace: the check, its glob and git's children, nothing of imm's
    assert findings(evidence)["processes"] <= 3


def test_a_pass_holding_a_credential_without_isolation_is_refused_naming_the_fix(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(tmp_path / "remote.git")],
                   check=True)  # fmt: skip
    remote = str(tmp_path / "remote.git")
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", remote], check=True)
    # a PATH without unshare and setpriv: imm can become no other user
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("git", "sh"):
        found = subprocess.run(
            ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True
        )
        (tools / tool).symlink_to(found.stdout.strip())
    path = f"{tools}{os.pathsep}{Path(sys.executable).parent}"
    refused = _imm(repo, tmp_path, "reconcile", "init", "--remote", "origin", PATH=path)
    assert refused.returncode == 2, refused.stderr
    assert "integration checks would run within reach of imm's token" in refused.stderr
    assert "integration_isolation: none" in refused.stderr


def test_integration_isolation_none_runs_checks_as_imms_own_user(tmp_path: Path) -> None:
    config = "integration_isolation: none\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    admitted = _imm(repo, tmp_path, "reconcile", "init", "--admit")
    assert "integration checks run as imm's own user (integration_isolation: none)" in (
        admitted.stderr
    )


def test_check_setup_runs_once_and_what_it_made_is_on_every_checks_path_read_only(
    open_dir: Path,
) -> None:
    tool = "mkdir -p $HOME/.local/bin && printf '#!/bin/sh\\necho made-by-setup\\n' > $HOME/.local/bin/made && chmod +x $HOME/.local/bin/made"  # noqa: E501
    config = f"check_setup: sh -c {json.dumps(tool)}\n"
    # passes only when setup's tool and its folder cannot be changed
    tamper = (
        "import os, sys; p = os.path.join(os.environ['HOME'], '.local/bin/made'); "
        "sys.exit(1 if os.access(p, os.W_OK) or os.access(os.path.dirname(p), os.W_OK) else 0)"
    )
    checks = {
        "a": descriptor(["made"], executable="made"),
        "b": descriptor(["-c", tamper]),
        "c": descriptor(["made"], executable="made"),
    }
    repo = make_project(open_dir / "repo", {"a": [], "b": [], "c": []}, checks=checks,
                        extra_files={".github/imm.yml": config})  # fmt: skip
    home = open_dir / "home"
    home.mkdir()
    assert _imm(repo, home, "reconcile", "init", "--admit").returncode == 0
    for task in "abc":
        work(repo, task)
    landed = _imm(repo, home, "reconcile", "init")
    assert landed.returncode == 0, landed.stderr
    assert landed.stderr.count("check_setup passed") == 1
    assert [c.state for c in current(repo).state.children] == ["integrated"] * 3


SUDO_TESTER = "imm-sudo-tester"


def _interpreter_for(uid: int, gid: int, path: str) -> str | None:
    """A Python of this version that `uid` can run with imm on PYTHONPATH: this one, or the
    system's (a pyenv Python under root's 0700 home is out of another user's reach)."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
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


def test_through_sudo_a_lanes_check_finds_no_token_and_changes_nothing_imm_uses(
    open_dir: Path, sudo_runner: tuple[int, int, Path]
) -> None:
    uid, gid, tools = sudo_runner
    repo, home, evidence, targets = _attacked_project(open_dir)
    imm_path = str(_imm_for_any_user(tools.with_name(tools.name + "-imm")))
    python = _interpreter_for(uid, gid, imm_path)
    if python is None:
        pytest.skip("no Python of this version that another user can run")

    def imm_as_runner(*args: str) -> subprocess.CompletedProcess[str]:
        """`imm` as the ordinary user, holding a token as the integrate job's step does."""
        chown_tree(open_dir, uid, gid)
        try:
            return subprocess.run(
                ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-m",
                 "imm_action", *args, "--repo", str(repo)],
                env={"PATH": f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin",
                     "PYTHONPATH": imm_path, "HOME": str(home), "GITHUB_TOKEN": TOKEN,
                     "IMM_TOKEN": TOKEN},
                capture_output=True, text=True, check=False,
            )  # fmt: skip
        finally:
            chown_tree(open_dir, 0, 0)  # the test's own git calls run as root

    admitted = imm_as_runner("reconcile", "init", "--admit")
    assert admitted.returncode == 0, admitted.stderr
    before = {target: Path(target).read_bytes() for target in targets}
    work(repo, "a", {"a.txt": "a\n", "attack.py": PROBE})
    landed = imm_as_runner("reconcile", "init")
    assert "integration checks run as user imm-check (through sudo)" in landed.stderr
    assert landed.returncode == 0, landed.stderr
    found = findings(evidence)
    assert found["uid"] not in (uid, 0)
    assert TOKEN not in found["read"]
    assert found["wrote"] == []
    assert not found["pushed"]
    for target, content in before.items():
        assert Path(target).read_bytes() == content, target
    assert running_with(SLEEPER) == []
    assert [c.state for c in current(repo).state.children] == ["integrated"]
