"""The integrator re-checks every lane commit and adopts only people's pushes (issue 12): these
attacks go straight at the user's repository, past the lane, as an executor running with the
user's rights could."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.batch_helpers import (
    TRAILER,
    current,
    head_of,
    lane_of,
    make_lane_commit,
    make_project,
    publish,
    run_pass,
    work,
)
from tests.conftest import git, run_cli


def reasons(repo: Path) -> dict[str, str | None]:
    return {c.task_id: c.reason for c in current(repo).state.children}


def _commit_with_entry(repo: Path, task: str, *, base: str, mode: str, path: str, oid: str) -> str:
    """A lane commit on `base` adding one raw index entry (a gitlink, a symlink...)."""
    batch_id, _ = lane_of(repo, task)
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": os.path.join(scratch, "index")}

        def run(*args: str) -> str:
            done = subprocess.run(
                ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
            )
            return done.stdout.strip()

        run("read-tree", base)
        run("update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}")
        tree = run("write-tree")
        message = f"imm({task}): Do {task}\n\n{TRAILER}: {batch_id}\n"
        return run("commit-tree", tree, "-p", base, "-m", message)


def test_a_forged_outcome_with_a_file_outside_the_scope_is_parked_naming_it(
    tmp_path: Path,
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)
    work(repo, "a", {"a.txt": "a\n", "EVIL.txt": "evil\n"})
    run_pass(repo)
    assert reasons(repo)["a"] == "lane_outside_scope: EVIL.txt"
    assert "EVIL.txt" not in git(repo, "ls-tree", "-r", "--name-only", "imm/init")


def test_a_lane_commit_with_a_gitlink_is_parked(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    _, base = lane_of(repo, "a")
    commit = _commit_with_entry(repo, "a", base=base, mode="160000", path="a.txt/sub", oid=base)
    publish(repo, "a", commit)
    run_pass(repo)
    assert reasons(repo)["a"] == "lane_gitlink: a.txt/sub"


def test_a_lane_commit_with_a_symlink_out_of_the_repository_is_parked(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    _, base = lane_of(repo, "a")
    target = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=repo, input="/etc/passwd", check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    commit = _commit_with_entry(repo, "a", base=base, mode="120000", path="a.txt", oid=target)
    publish(repo, "a", commit)
    run_pass(repo)
    assert reasons(repo)["a"] == "lane_symlink_outside: a.txt"


def test_an_outcome_that_disagrees_with_its_lane_branch_is_parked(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    run_pass(repo)
    commit = work(repo, "a")
    other = make_lane_commit(repo, lane_of(repo, "a")[1], "a", {"a.txt": "other\n"}, batch_id="x")
    git(repo, "update-ref", "refs/heads/imm-lane/init/a", other, commit)
    run_pass(repo)
    reason = reasons(repo)["a"] or ""
    assert reason.startswith("lane_outcome_mismatch: ")
    assert commit in reason
    assert other in reason


def test_a_fast_forward_carrying_this_batchs_trailer_is_never_adopted(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)
    batch_id, _ = lane_of(repo, "a")
    head = head_of(repo, "imm/init")
    forged = make_lane_commit(repo, head, "b", {"EVIL.txt": "evil\n"}, batch_id=batch_id)
    git(repo, "update-ref", "refs/heads/imm/init", forged, head)
    work(repo, "a")
    run_pass(repo)
    stored = current(repo)
    assert stored.state.adopted_heads == []
    # kept aside, never adopted, and the batch goes on without it (issue 42 #4)
    assert forged not in git(repo, "rev-list", "imm/init").split()
    assert f"(first commit {forged}) while lanes of the batch were running" in (
        stored.state.quarantined[0].reason
    )


def test_an_adopted_push_is_listed_as_unverified_without_the_name_it_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo, admit=False)  # started, no lane admitted: none could have pushed
    head = head_of(repo, "imm/init")
    pushed = make_lane_commit(repo, head, "someone", {"notes.txt": "hi\n"}, batch_id="other")
    git(repo, "update-ref", "refs/heads/imm/init", pushed, head)
    run_pass(repo, admit=False)
    stored = current(repo)
    assert [a.to for a in stored.state.adopted_heads] == [pushed]
    assert stored.report is not None
    line = f"adopted: {pushed} (pushed outside imm, unverified)"
    assert stored.report.adopted == [line]
    _, text, _ = run_cli(capsys, "status", "--repo", str(repo))
    assert line in text
    _, markdown, _ = run_cli(capsys, "status", "--repo", str(repo), "--format", "markdown")
    assert f"- {line}" in markdown
