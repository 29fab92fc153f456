"""Integration checks run code a lane wrote, where imm's credentials are not (SPEC §8, ADR
0031): as another user, in a PID namespace of their own. A lane's check attacks everything it
can reach from there; nothing it finds is the token and nothing it writes changes what imm
does next. These tests need root or passwordless sudo (CI runs as root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imm_action.verify.isolation import check_user
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
