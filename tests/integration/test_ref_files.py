"""Refs read straight from git's files (git/ref_files.py) are exactly what git reads, or the
reader hands the question to git."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imm_action.git.ref_files import list_ref_files, read_ref_files
from imm_action.git.repo import GitRepo
from tests.conftest import git, make_repo

NAMES = [
    "refs/heads/imm/a",
    "refs/heads/imm-lane/a/t1",
    "refs/imm/batches/b-1",
    "refs/imm/lanes/b-1/t1",
    "refs/imm/lanes/b-1/t2",
    "refs/imm/lanes/b-2",  # a folder of the same name as a ref's parent: never both
]


def _for_each_ref(repo: Path, names: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = dict.fromkeys(names)
    listing = git(repo, "for-each-ref", "--format=%(objectname) %(refname)", *names)
    for line in listing.splitlines():
        oid, name = line.split(" ", 1)
        if name in found:
            found[name] = oid
    return found


def _listed_by_git(repo: Path, prefix: str) -> dict[str, str]:
    listing = git(repo, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    return {name: oid for oid, name in (line.split(" ", 1) for line in listing.splitlines())}


def _commits(repo: Path) -> list[str]:
    first = git(repo, "rev-parse", "HEAD").strip()
    second = git(repo, "commit-tree", "HEAD^{tree}", "-p", first, "-m", "two").strip()
    return [first, second]


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["update", "delete", "pack"]),
        st.sampled_from(NAMES),
        st.integers(0, 1),
    ),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=OPERATIONS)
def test_refs_read_from_the_files_are_the_refs_git_reads(
    tmp_path_factory: object, operations: list[tuple[str, str, int]]
) -> None:
    repo = make_repo(tmp_path_factory.mktemp("r"), {"a.txt": "a\n"})  # type: ignore[attr-defined]
    commits = _commits(repo)
    for operation, name, which in operations:
        if operation != "pack":
            # a D/F conflict with an existing ref is refused by git: the refs stay as they were
            change = [name, commits[which]] if operation == "update" else ["-d", name]
            refused = subprocess.DEVNULL
            subprocess.run(["git", "update-ref", *change], cwd=repo, check=False, stderr=refused)
        else:
            git(repo, "pack-refs", "--all", *(["--prune"] if which else ["--no-prune"]))
        # plain names, plain files: read directly every time, never handed to git
        assert read_ref_files(repo / ".git", NAMES) == _for_each_ref(repo, NAMES)
        for prefix in ("refs/imm/", "refs/imm/lanes/", "refs/heads/"):
            listed = list_ref_files(repo / ".git", prefix)
            assert listed == _listed_by_git(repo, prefix), prefix
            assert list(listed or {}) == sorted(listed or {})  # in git's order


def test_a_loose_ref_wins_over_its_packed_copy(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    old, new = _commits(repo)
    git(repo, "update-ref", "refs/imm/batches/b", old)
    git(repo, "pack-refs", "--all", "--no-prune")  # packed, and still loose
    git(repo, "update-ref", "refs/imm/batches/b", new)
    assert read_ref_files(repo / ".git", ["refs/imm/batches/b"]) == {"refs/imm/batches/b": new}


def test_a_packed_ref_is_read_from_packed_refs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    old, _ = _commits(repo)
    git(repo, "update-ref", "refs/imm/batches/b", old)
    git(repo, "pack-refs", "--all", "--prune")
    assert not (repo / ".git/refs/imm/batches/b").exists()
    found = read_ref_files(repo / ".git", ["refs/imm/batches/b", "refs/imm/batches/c"])
    assert found == {"refs/imm/batches/b": old, "refs/imm/batches/c": None}


def test_a_symbolic_ref_is_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    assert read_ref_files(repo / ".git", ["refs/heads/alias"]) is None
    head = git(repo, "rev-parse", "HEAD").strip()
    assert GitRepo(repo).read_refs(["refs/heads/alias"]) == {"refs/heads/alias": head}


def test_names_git_might_read_otherwise_are_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    for name in [
        "HEAD",
        "refs/heads/../../config",
        "refs/imm/x.lock",
        "refs/bisect/bad",
        "refs/worktree/mine",
        "refs/heads/with space",
        "refs/imm/.hidden",
        "refs/imm//double",
    ]:
        assert read_ref_files(repo / ".git", [name]) is None, name


def test_a_reftable_repository_is_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / ".git" / "reftable").mkdir()  # what `git init --ref-format=reftable` makes
    assert read_ref_files(repo / ".git", ["refs/heads/main"]) is None


def test_an_unparseable_packed_refs_is_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    (repo / ".git" / "packed-refs").write_text("# pack-refs with: peeled\nnot a line\n")
    assert read_ref_files(repo / ".git", ["refs/imm/batches/b"]) is None


def test_refs_of_a_linked_worktree_are_read_from_the_common_directory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    old, _ = _commits(repo)
    git(repo, "update-ref", "refs/imm/batches/b", old)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    linked = GitRepo(tmp_path / "linked")
    assert linked.read_refs(["refs/imm/batches/b"]) == {"refs/imm/batches/b": old}


def test_the_current_branch_is_read_from_head_and_is_none_when_detached(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    git(repo, "checkout", "-q", "-b", "feature/x")
    assert GitRepo(repo).current_branch() == "feature/x"
    git(repo, "checkout", "-q", "--detach")
    assert GitRepo(repo).current_branch() is None


def test_a_linked_worktree_has_its_own_current_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    main = GitRepo(repo).current_branch()
    git(repo, "worktree", "add", "-q", "-b", "other", str(tmp_path / "linked"))
    assert GitRepo(tmp_path / "linked").current_branch() == "other"
    assert GitRepo(repo).current_branch() == main


def test_a_branch_head_is_the_branch_else_what_the_name_names(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    first, second = _commits(repo)
    git(repo, "update-ref", "refs/heads/base", second)
    git(repo, "tag", "v1", first)
    reader = GitRepo(repo)
    assert reader.branch_head("base") == second
    assert reader.branch_head("v1") == first  # no such branch: the name as git reads it
    assert reader.branch_head("missing") is None


def test_a_folder_listing_skips_lock_and_dot_files_as_git_does(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    old, new = _commits(repo)
    git(repo, "update-ref", "refs/imm/batches/b", old)
    folder = repo / ".git/refs/imm/batches"
    (folder / "b.lock").write_text(new + "\n")  # a writer at work
    (folder / ".hidden").write_text(new + "\n")
    listed = list_ref_files(repo / ".git", "refs/imm/batches/")
    assert listed == _listed_by_git(repo, "refs/imm/batches/") == {"refs/imm/batches/b": old}


def test_a_folder_holding_what_git_might_read_otherwise_is_listed_by_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    old, _ = _commits(repo)
    git(repo, "update-ref", "refs/imm/batches/b", old)
    git(repo, "symbolic-ref", "refs/imm/batches/alias", "refs/imm/batches/b")
    assert list_ref_files(repo / ".git", "refs/imm/batches/") is None
    expected = {"refs/imm/batches/alias": old, "refs/imm/batches/b": old}
    assert GitRepo(repo).list_refs("refs/imm/batches/") == expected
    (repo / ".git/refs/imm/batches/alias").unlink()
    (repo / ".git/refs/imm/batches/with space").write_text(old + "\n")
    assert list_ref_files(repo / ".git", "refs/imm/batches/") is None


def test_folders_git_might_list_otherwise_are_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    for prefix in ["refs/imm", "refs/bisect/", "refs/", "refs/imm/../", "HEAD/"]:
        assert list_ref_files(repo / ".git", prefix) is None, prefix
    (repo / ".git" / "reftable").mkdir()
    assert list_ref_files(repo / ".git", "refs/imm/") is None


def test_a_folder_with_no_refs_lists_none(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    assert list_ref_files(repo / ".git", "refs/imm/batches/") == {}
