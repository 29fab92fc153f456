"""The git adapter's own writes are exactly git's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from imm_action.git.repo import GitRepo, Identity
from tests.conftest import git, make_repo


def test_a_commit_written_directly_is_the_commit_git_commit_tree_writes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n", "ü/b.txt": "b\n"})
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    head = git(repo, "rev-parse", "HEAD").strip()
    message = "imm(t): Grüße\n\nImmune-Brain-Batch: batch-x-1\n"
    ours = GitRepo(repo).commit_tree(
        tree, [head], message, author=Identity("Ann Ö", "ann@example.com"),
        author_date="1700000001 +0100", committer_date="1700000002 -0500",
    )  # fmt: skip
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ann Ö", "GIT_AUTHOR_EMAIL": "ann@example.com",
           "GIT_AUTHOR_DATE": "1700000001 +0100", "GIT_COMMITTER_NAME": "imm-action",
           "GIT_COMMITTER_EMAIL": "imm-action@users.noreply.github.com",
           "GIT_COMMITTER_DATE": "1700000002 -0500"}  # fmt: skip
    theirs = subprocess.run(
        ["git", "commit-tree", tree, "-p", head, "-F", "-"], cwd=repo, env=env,
        input=message, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert ours == theirs
    git(repo, "fsck", "--strict", "--no-dangling")


def test_change_identities_of_several_pairs_in_one_call(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.txt").write_text("changed\n")
    (repo / "b.txt").write_text("new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    second = git(repo, "rev-parse", "HEAD").strip()
    same, change = GitRepo(repo).change_identities([(first, first), (first, second)])
    assert same == {}
    assert set(change) == {"a.txt", "b.txt"}
    assert change["a.txt"].startswith("100644 ")


def test_reading_a_missing_file_or_object_gives_none(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    reader = GitRepo(repo)
    assert reader.read_file("HEAD", "a.txt") == "a\n"
    assert reader.read_file("HEAD", "missing.txt") is None
    assert reader.resolve("no-such-ref") is None
    reader.close()


def test_blobs_and_trees_written_directly_are_gits_own(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    files = {"state.json": "{}\n", "report.json": '{"ü": 1}\n', "b.json": ""}
    ours = GitRepo(repo).write_tree(files)
    entries = ""
    for name in sorted(files):
        hashed = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=files[name],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        blob = hashed.stdout.strip()
        entries += f"100644 blob {blob}\t{name}\n"
    theirs = subprocess.run(["git", "mktree"], cwd=repo, input=entries, capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    assert ours == theirs
    assert git(repo, "cat-file", "-p", f"{ours}:report.json") == '{"ü": 1}\n'
    git(repo, "fsck", "--strict", "--no-dangling")


def test_a_folders_files_are_listed_by_name_with_gits_blob_ids(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"d/a.json": "a\n", "d/ü b.json": "b\n", "d/sub/c": "c\n"})
    os.symlink("a.json", repo / "d" / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    files = GitRepo(repo).folder_files("HEAD", "d")
    expected = {
        name: git(repo, "rev-parse", f"HEAD:d/{name}").strip()
        for name in ("a.json", "ü b.json", "link")
    }
    assert files == expected  # the sub-folder is no file


def test_a_missing_folder_or_a_file_has_no_listing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"d/a.json": "a\n"})
    reader = GitRepo(repo)
    assert reader.folder_files("HEAD", "missing") is None
    assert reader.folder_files("HEAD", "d/a.json") is None


def test_a_forked_copy_knows_the_repository_without_asking_git_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    original = GitRepo(repo)
    git_dir, objects = original.git_directory(), original.objects_directory()
    head = git(repo, "rev-parse", "HEAD").strip()
    original.commit(head)
    copy = original.forked()
    (repo / ".git").rename(repo / "moved")  # git could no longer find it
    assert copy.git_directory() == git_dir
    assert copy.objects_directory() == objects
    assert copy.commit(head).oid == head  # read before the fork: no process
    assert copy._objects is not original._objects  # its own reader
