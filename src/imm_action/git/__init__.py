"""git access: the only package that runs git."""

from __future__ import annotations

from pathlib import Path

from imm_action.git.errors import GitAuthFailure, GitConflict, GitError, GitFatal, GitRetriable
from imm_action.git.runner import GitResult, GitRunner


def tracked_paths(repo: Path, pathspec: str) -> set[str]:
    """Paths under `pathspec` that git tracks (index), relative to `repo` with '/' separators."""
    listing = GitRunner(repo).output(["ls-files", "-z", "--", pathspec])
    return {path for path in listing.split("\0") if path}


def repo_root(path: Path) -> Path:
    """The top of the work tree containing `path`."""
    return Path(GitRunner(path).output(["rev-parse", "--show-toplevel"]).strip())


def is_work_tree(path: Path) -> bool:
    result = GitRunner(path).run(["rev-parse", "--is-inside-work-tree"], ok_codes=(0, 128))
    return result.exit_code == 0 and result.stdout.strip() == "true"


__all__ = [
    "GitAuthFailure",
    "GitConflict",
    "GitError",
    "GitFatal",
    "GitResult",
    "GitRetriable",
    "GitRunner",
    "changed_paths",
    "is_work_tree",
    "repo_root",
    "tracked_paths",
]


def changed_paths(repo: Path, base: str) -> set[str]:
    """Paths changed in the work tree since the merge base of `base` and HEAD (a PR's change)."""
    runner = GitRunner(repo)
    fork = runner.output(["merge-base", base, "HEAD"]).strip()
    listing = runner.output(["diff", "--name-only", "--relative", "-z", "--no-renames", fork, "--"])
    return {path for path in listing.split("\0") if path}
