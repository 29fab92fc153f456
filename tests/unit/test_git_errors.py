"""git failures are typed from git's own messages and exit codes, never from a stray substring."""

from __future__ import annotations

import pytest

from imm_action.errors import EXIT_INVALID_INPUT, ImmError
from imm_action.git.errors import GitAuthFailure, GitConflict, GitError, GitFatal, GitRetriable
from imm_action.git.runner import classify

URL = "https://github.com/o/r.git/"

# (git's stderr, the exit code git gave) -> the kind; messages as git 2.39 prints them.
AUTH = [
    f"fatal: could not read Username for '{URL}': terminal prompts disabled",
    f"fatal: could not read Password for '{URL}': terminal prompts disabled",
    f"remote: Invalid username or password.\nfatal: Authentication failed for '{URL}'",
    f"fatal: unable to access '{URL}': The requested URL returned error: 401",
    "remote: Permission to o/r.git denied to bot.\n"
    f"fatal: unable to access '{URL}': The requested URL returned error: 403",
    "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.",
]
TRANSIENT = [
    f"fatal: unable to access '{URL}': Could not resolve host: github.com",
    f"fatal: unable to access '{URL}': Failed to connect to github.com port 443 after 3 ms: "
    "Couldn't connect to server",
    f"fatal: unable to access '{URL}': Recv failure: Connection reset by peer",
    f"fatal: unable to access '{URL}': Operation timed out after 300000 milliseconds",
    f"fatal: unable to access '{URL}': The requested URL returned error: 502",
    f"fatal: unable to access '{URL}': The requested URL returned error: 503",
    "error: RPC failed; HTTP 500 curl 22 The requested URL returned error: 500\n"
    "fatal: the remote end hung up unexpectedly",
    "fatal: the remote end hung up unexpectedly\nfatal: early EOF",
    "fatal: Unable to create '/r/.git/index.lock': File exists.",
]
CONFLICT = [
    "fatal: cannot lock ref 'refs/imm/batches/b': is at 1111 but expected 2222",
    "fatal: cannot lock ref 'refs/heads/imm/x': reference already exists",
    " ! [rejected]        imm/x -> imm/x (stale info)\nerror: failed to push some refs",
]
# Names and paths that contain the words of other kinds are still just fatal.
NOT_AUTH = [
    "fatal: ambiguous argument 'feature-401': unknown revision or path not in the working tree.",
    "fatal: Not a valid object name fix-401-login",
    "fatal: bad object 4013a9c0ffee401",
    "fatal: ambiguous argument 'non-fast-forward': unknown revision or path",
    "fatal: pathspec 'docs/Authentication failed for.md' did not match any files",
]


@pytest.mark.parametrize("stderr", AUTH)
def test_git_refusing_the_credentials_is_an_auth_failure(stderr: str) -> None:
    assert type(classify(["fetch", "origin"], 128, stderr)) is GitAuthFailure


@pytest.mark.parametrize("stderr", TRANSIENT)
def test_network_server_and_lock_failures_are_retriable(stderr: str) -> None:
    assert type(classify(["fetch", "origin"], 128, stderr)) is GitRetriable


@pytest.mark.parametrize("stderr", CONFLICT)
def test_a_moved_ref_is_a_conflict(stderr: str) -> None:
    assert type(classify(["update-ref", "--stdin"], 128, stderr)) is GitConflict


@pytest.mark.parametrize("stderr", NOT_AUTH)
def test_an_object_or_path_name_with_another_kinds_words_is_fatal(stderr: str) -> None:
    assert type(classify(["rev-parse", "--verify", "x"], 128, stderr)) is GitFatal


def test_an_auth_message_without_gits_fatal_exit_code_is_not_an_auth_failure() -> None:
    # e.g. the text printed by a hook or an executor, passed through with exit 1
    error = classify(["commit-tree", "x"], 1, f"fatal: Authentication failed for '{URL}'")
    assert not isinstance(error, GitAuthFailure)


def test_an_auth_failure_is_one_line_naming_the_remote_and_the_token_exits_2() -> None:
    stderr = f"fatal: could not read Username for '{URL}': terminal prompts disabled"
    error = classify(["fetch", "--quiet", "--prune", "origin", "+refs/imm/*:refs/x/*"], 128, stderr)
    assert isinstance(error, ImmError)
    assert error.exit_code == EXIT_INVALID_INPUT
    assert str(error).count("\n") == 0
    assert "remote origin" in str(error)
    assert URL in str(error)
    assert "check the token" in str(error)


def test_a_credential_in_a_url_never_reaches_a_message() -> None:
    stderr = "fatal: unable to access 'https://x-access-token:ghs_SECRET@github.com/o/r.git/': "
    error = classify(["push", "https://x-access-token:ghs_SECRET@github.com/o/r.git"], 128, stderr)
    assert isinstance(error, GitError)
    assert "ghs_SECRET" not in str(error) + error.stderr + " ".join(error.command)
