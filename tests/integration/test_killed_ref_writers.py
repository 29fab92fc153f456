"""A writer of imm's refs killed inside a git transaction leaves git's lock files behind; the
next writer of ours clears what was its debris and nothing that is not (git/repo.py,
`refs_locked`). A deletion locks `packed-refs` itself: its `.lock`, left by a killed
integration, used to make every later integration lose its race, for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imm_action.git.errors import GitConflict
from imm_action.git.repo import GitRepo, RefUpdate
from tests.conftest import git, make_repo

SRC = Path(__file__).resolve().parents[2] / "src"
REF = "refs/imm/lanes/batch-1/t1"

# imm's ref lock taken, then a transaction that deletes REF prepared (git now holds REF.lock
# and packed-refs.lock) and never committed: where a SIGKILL finds an integration.
KILLED_WRITER = """
import subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from imm_action.git.repo import GitRepo
repo, ref = Path(sys.argv[2]), sys.argv[3]
with GitRepo(repo).refs_locked():
    git = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=repo,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    git.stdin.write(f"start\\ndelete {ref}\\nprepare\\n".encode())
    git.stdin.flush()
    git.stdout.readline(), git.stdout.readline()  # start: ok, prepare: ok
    print("holding", flush=True)
    time.sleep(60)
"""


def _repo_with_ref(tmp_path: Path) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", REF, head)
    return repo, head


def _wait_until_gone(group: int) -> None:
    """Until no process of `group` lives: the writer's git dies on its own time after the
    SIGKILL, and a git still seen at work in the repository keeps its lock, as it must."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        living = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":  # (state, ppid, pgrp, ...)
                living.append(stat)
        if not living:
            return
        time.sleep(0.01)
    raise AssertionError(f"process group {group} still lives 10 s after its SIGKILL")


def test_a_writer_killed_inside_a_deleting_transaction_blocks_no_later_writer(
    tmp_path: Path,
) -> None:
    repo, head = _repo_with_ref(tmp_path)
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(SRC), str(repo), REF],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert writer.stdout is not None
    assert writer.stdout.readline() == b"holding\n"
    os.killpg(writer.pid, signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    _wait_until_gone(writer.pid)
    assert (repo / ".git" / "packed-refs.lock").exists()  # git's debris
    GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert GitRepo(repo).read_refs([REF]) == {REF: None}
    assert not (repo / ".git" / "packed-refs.lock").exists()


def test_a_packed_refs_lock_older_than_our_killed_writer_is_someone_elses_and_stays(
    tmp_path: Path,
) -> None:
    repo, head = _repo_with_ref(tmp_path)
    packed_lock = repo / ".git" / "packed-refs.lock"
    packed_lock.write_text("")  # the user's `git pack-refs`, at work since a minute
    an_hour_ago = time.time() - 60
    os.utime(packed_lock, (an_hour_ago, an_hour_ago))
    # a writer of ours killed since then
    (repo / ".git" / "imm-refs.lock").write_text(f"{time.time() - 5:.3f}\n")
    with pytest.raises(GitConflict):
        GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert packed_lock.exists()


def test_a_packed_refs_lock_is_left_alone_when_no_writer_of_ours_was_killed(
    tmp_path: Path,
) -> None:
    repo, head = _repo_with_ref(tmp_path)
    GitRepo(repo).compare_and_swap([RefUpdate("refs/imm/other", head, None)])  # one finished
    packed_lock = repo / ".git" / "packed-refs.lock"
    packed_lock.write_text("")  # someone else's git, at work right now
    with pytest.raises(GitConflict):
        GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert packed_lock.exists()
    # a lost race clears the mark as a success does: the lock stays on the next attempt too
    with pytest.raises(GitConflict):
        GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert packed_lock.exists()


# the user's own git at work: a transaction deleting a ref of theirs, prepared (it holds
# packed-refs.lock open) and committed when told
USERS_GIT = """
import subprocess, sys
repo, ref = sys.argv[1], sys.argv[2]
git = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=repo,
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
git.stdin.write(f"start\\ndelete {ref}\\nprepare\\n".encode())
git.stdin.flush()
git.stdout.readline(), git.stdout.readline()
print("holding", flush=True)
sys.stdin.readline()
git.stdin.write(b"commit\\n")
git.stdin.close()
git.stdout.read()
sys.exit(git.wait())
"""


def test_the_users_git_holding_packed_refs_lock_after_a_killed_writer_of_ours_keeps_it(
    tmp_path: Path,
) -> None:
    repo, head = _repo_with_ref(tmp_path)
    users_ref = "refs/heads/users-branch"
    git(repo, "update-ref", users_ref, head)
    # a writer of ours was killed a moment ago, leaving only its mark
    (repo / ".git" / "imm-refs.lock").write_text(f"{time.time() - 2:.3f}\n")
    users = subprocess.Popen(
        [sys.executable, "-c", USERS_GIT, str(repo), users_ref],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert users.stdout is not None
    assert users.stdin is not None
    assert users.stdout.readline() == b"holding\n"
    packed_lock = repo / ".git" / "packed-refs.lock"
    assert packed_lock.exists()
    with pytest.raises(GitConflict) as lost:
        GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert "packed-refs.lock': File exists" in lost.value.stderr  # git names the file
    assert packed_lock.exists()  # theirs, live: never removed
    users.stdin.write(b"go\n")
    users.stdin.close()
    assert users.wait() == 0  # their update was not lost
    users.stdout.close()
    assert git(repo, "for-each-ref", users_ref) == ""
    GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])  # then ours goes through
    assert GitRepo(repo).read_refs([REF]) == {REF: None}


def test_a_packed_refs_lock_made_long_after_our_killed_writer_began_is_not_its(
    tmp_path: Path,
) -> None:
    repo, head = _repo_with_ref(tmp_path)
    (repo / ".git" / "imm-refs.lock").write_text(f"{time.time() - 3600:.3f}\n")
    packed_lock = repo / ".git" / "packed-refs.lock"
    packed_lock.write_text("")  # made now, by someone else's git (ended or not)
    with pytest.raises(GitConflict):
        GitRepo(repo).compare_and_swap([RefUpdate(REF, None, head)])
    assert packed_lock.exists()
