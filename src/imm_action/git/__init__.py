"""git access: the only package that runs git."""

from __future__ import annotations

from pathlib import Path

from imm_action.git.errors import GitAuthFailure, GitConflict, GitError, GitFatal, GitRetriable
from imm_action.git.runner import GitResult, GitRunner


def tracked_paths(repo: Path, pathspec: str) -> set[str]:
    """Paths under `pathspec` that git tracks (index), relative to `repo` with '/' separators."""
    listing = GitRunner(repo).output(["ls-files", "-z", "--", pathspec])
    return {path for path in listing.split("\0") if path}


def work_tree_top(path: Path) -> Path | None:
    """The top of the git work tree `path` lies in; None when it lies in none (a bare repository,
    a git directory, no repository). One git process: every command asks this first."""
    asked = ["rev-parse", "--is-inside-work-tree", "--show-toplevel"]
    result = GitRunner(path).run(asked, ok_codes=(0, 128))
    lines = result.stdout.splitlines()
    if result.exit_code != 0 or len(lines) < 2 or lines[0] != "true":
        return None
    return Path(lines[1])


__all__ = [
    "GitAuthFailure",
    "GitConflict",
    "GitError",
    "GitFatal",
    "GitResult",
    "GitRetriable",
    "GitRunner",
    "changed_paths",
    "tracked_paths",
    "work_tree_top",
]


def changed_paths(repo: Path, base: str) -> set[str]:
    """Paths changed in the work tree since the merge base of `base` and HEAD (a PR's change)."""
    runner = GitRunner(repo)
    fork = runner.output(["merge-base", base, "HEAD"]).strip()
    listing = runner.output(["diff", "--name-only", "--relative", "-z", "--no-renames", fork, "--"])
    return {path for path in listing.split("\0") if path}
