"""git against a real smart-HTTP remote that wants a token: a wrong token is a one-line exit 2,
a passing outage is retried, and nothing ever waits for a password prompt."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from imm_action.git import GitAuthFailure, GitFatal, GitRetriable, GitRunner
from imm_action.git.runner import RetryPolicy
from tests.batch_helpers import make_project
from tests.conftest import git, run_cli
from tests.git_http_remote import GitHttpRemote

FAST = RetryPolicy(attempts=3, first_wait_s=0.01, max_wait_s=0.05)


def _project_on(host: GitHttpRemote, root: Path, token: str) -> Path:
    """A project whose `origin` is the HTTP host, with `token` configured as actions/checkout
    does (an `http.<url>.extraheader`, never in the URL)."""
    repo = make_project(root, {"a": []})
    host.create_repository("project")
    url = host.url("project")
    git(repo, "config", f"http.{url}.extraheader", host.auth_header())
    git(repo, "remote", "add", "origin", url)
    git(repo, "push", "-q", "origin", "main")
    git(repo, "config", f"http.{url}.extraheader", host.auth_header(token))
    return repo


def test_reconcile_with_the_right_token_keeps_the_batch_on_the_remote(
    git_http_remote: GitHttpRemote, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", git_http_remote.token)
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo), "--remote", "origin")
    assert code == 0, err
    bare = git_http_remote.root / "project.git"
    assert git(bare, "for-each-ref", "--format=%(refname)", "refs/imm/batches/").strip()


@pytest.mark.parametrize("command", ["reconcile", "status"])
def test_a_wrong_token_exits_2_with_one_line_naming_the_remote(
    git_http_remote: GitHttpRemote,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", "wrong-token")
    code, out, err = run_cli(capsys, command, "init", "--repo", str(repo), "--remote", "origin")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(f"imm {command}: git could not authenticate to the remote origin (")
    assert git_http_remote.base_url in err
    assert "check the token" in err
    assert "wrong-token" not in err
    assert "details in" not in err
    assert 401 in {request.status for request in git_http_remote.requests}


def test_a_wrong_token_is_an_auth_failure_from_the_runner(
    git_http_remote: GitHttpRemote, tmp_path: Path
) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", "wrong-token")
    with pytest.raises(GitAuthFailure) as caught:
        GitRunner(repo, retry=FAST).run(["fetch", "origin"])
    assert caught.value.remote == "origin"
    assert [r.status for r in git_http_remote.requests][-1:] == [401]  # asked once, no retry


def test_an_object_name_containing_401_is_not_an_auth_failure(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    with pytest.raises(GitFatal):
        GitRunner(repo).run(["rev-parse", "--verify", "--end-of-options", "fix-401-auth^{commit}"])


def test_a_passing_server_error_is_retried_and_logged(
    git_http_remote: GitHttpRemote, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", git_http_remote.token)
    git_http_remote.fail_next(2, status=503)
    with caplog.at_level(logging.WARNING, logger="imm_action.git"):
        GitRunner(repo, retry=FAST).run(["fetch", "origin"])
    retries = [r.getMessage() for r in caplog.records if r.name == "imm_action.git"]
    assert len(retries) == 2
    assert all("503" in line and "trying again" in line for line in retries)


def test_retries_are_bounded(git_http_remote: GitHttpRemote, tmp_path: Path) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", git_http_remote.token)
    before = len(git_http_remote.requests)
    git_http_remote.fail_next(10, status=502)
    with pytest.raises(GitRetriable):
        GitRunner(repo, retry=FAST).run(["fetch", "origin"])
    assert [r.status for r in git_http_remote.requests[before:]] == [502] * FAST.attempts


def test_an_unreachable_remote_after_its_retries_exits_3_with_the_log_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path))
    repo = make_project(tmp_path / "r", {"a": []})
    git(repo, "remote", "add", "origin", "http://127.0.0.1:9/nothing-listens-here.git")
    code, _, err = run_cli(capsys, "status", "--repo", str(repo), "--remote", "origin")
    assert code == 3
    assert "Failed to connect" in err
    assert f"details in {tmp_path}" in err


def test_a_push_the_remote_refuses_exits_2_naming_the_ref_and_the_remotes_reason(
    git_http_remote: GitHttpRemote, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project_on(git_http_remote, tmp_path / "r", git_http_remote.token)
    hook = git_http_remote.root / "project.git" / "hooks" / "pre-receive"
    hook.write_text(
        f"#!/bin/sh\necho x >> {tmp_path}/refused\necho 'refs/imm/* are protected' >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    code, out, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo), "--remote", "origin")
    assert (code, out) == (2, "")
    [error] = [line for line in err.splitlines() if line.startswith("imm reconcile:")]
    assert "the remote refused to update refs/heads/imm/init: " in error
    assert "refs/imm/batches/" in error
    assert "pre-receive hook declined" in error
    assert "the remote said: refs/imm/* are protected" in error
    assert "details in" not in err
    assert (tmp_path / "refused").read_text() == "x\n"  # refused once: not re-run as a race
