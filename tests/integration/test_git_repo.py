"""The git adapter's own writes are exactly git's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imm_action.git import work_tree_top
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


def test_a_folder_of_a_sha256_repository_is_listed_with_its_long_blob_ids(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    (repo / "d").mkdir()
    for name in ("a.json", "b.json"):
        (repo / "d" / name).write_text(name)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    expected = {
        name: git(repo, "rev-parse", f"HEAD:d/{name}").strip() for name in ("a.json", "b.json")
    }
    assert GitRepo(repo).folder_files("HEAD", "d") == expected


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


# A snapshot: path -> (mode, content); a gitlink's content is the commit id it names.
_NAMES = st.sampled_from(["a", "b", "ü", "x y", "a.txt"])
_ENTRY = st.sampled_from([("100644", "one"), ("100644", "two"), ("100755", "one"),
                          ("120000", "one"), ("160000", "1" * 40)])  # fmt: skip


def _files_only(snapshot: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Without the paths that are also folders of others."""
    return {path: entry for path, entry in snapshot.items()
            if not any(other.startswith(path + "/") for other in snapshot)}  # fmt: skip


_SNAPSHOTS = st.dictionaries(
    st.lists(_NAMES, min_size=1, max_size=3).map("/".join), _ENTRY, max_size=8
).map(_files_only)


def _write_snapshot(repo: Path, snapshot: dict[str, tuple[str, str]], folder: str = "") -> str:
    """The tree of `snapshot` below `folder`, written with git's own `mktree`."""
    children: dict[str, str] = {}
    for path in snapshot:
        if path.startswith(folder):
            name = path[len(folder) :].split("/", 1)[0]
            children[name] = path
    lines = []
    for name, path in sorted(children.items()):
        if path == folder + name:
            mode, content = snapshot[path]
            oid = (
                content
                if mode == "160000"
                else _piped(repo, content, "hash-object", "-w", "--stdin")
            )
            kind = "commit" if mode == "160000" else "blob"
            lines.append(f"{mode} {kind} {oid}\t{name}")
        else:
            lines.append(
                f"040000 tree {_write_snapshot(repo, snapshot, folder + name + '/')}\t{name}"
            )
    return _piped(repo, "".join(f"{line}\n" for line in lines), "mktree", "--missing")


def _piped(repo: Path, text: str, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, input=text, capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.fixture(scope="module")
def diff_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("diffs") / "r", {"seed.txt": "seed\n"})


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(before=_SNAPSHOTS, after=_SNAPSHOTS)
def test_a_tree_change_read_in_process_is_what_git_diff_tree_finds(
    diff_repo: Path, before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]
) -> None:
    old, new = _write_snapshot(diff_repo, before), _write_snapshot(diff_repo, after)
    raw = git(diff_repo, "diff-tree", "-r", "-z", "--raw", "--no-renames", old, new)
    tokens = raw.split("\0")
    pairs = zip(tokens[::2], tokens[1::2], strict=False)
    expected = {path: " ".join(token.split(" ")[1:4:2]) for token, path in pairs
                if token.startswith(":")}  # fmt: skip
    assert GitRepo(diff_repo).tree_change(old, new) == expected


def test_a_repositorys_layout_is_what_git_says_of_each_part(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    layout = GitRepo(tmp_path / "linked").layout()
    asked = ["--absolute-git-dir", "--git-common-dir", "--git-path", "objects"]
    said = git(tmp_path / "linked", "rev-parse", *asked).splitlines()
    assert layout.git_dir == Path(said[0])
    assert layout.common_dir == (tmp_path / "linked" / said[1]).resolve() == repo / ".git"
    assert layout.objects_dir == (tmp_path / "linked" / said[2]).resolve()
    assert layout.object_format == "sha1"


def test_the_top_of_a_work_tree_is_found_from_a_folder_inside_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"docs/a.md": "a\n"})
    assert work_tree_top(repo / "docs") == repo


def test_a_git_directory_a_bare_repository_and_a_plain_folder_lie_in_no_work_tree(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    (tmp_path / "plain").mkdir()
    for folder in (repo / ".git", tmp_path / "bare.git", tmp_path / "plain"):
        assert work_tree_top(folder) is None, folder


def test_the_users_identity_is_the_last_value_of_each_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    assert GitRepo(repo).configured_identity() is None  # the tests' git has no user.*
    git(repo, "config", "user.name", "First")
    assert GitRepo(repo).configured_identity() is None  # no e-mail yet
    git(repo, "config", "--add", "user.name", "Second Name")
    git(repo, "config", "user.email", "second@example.com")
    expected = Identity("Second Name", "second@example.com")
    assert GitRepo(repo).configured_identity() == expected
