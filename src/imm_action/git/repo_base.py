"""What every part of a repository shares: where it is, its git, its object reader and what it
found out about its objects (which never change)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from imm_action.git.objects import CommitInfo, ObjectReader
from imm_action.git.runner import GitRunner


class RepoBase:
    def __init__(self, path: Path, runner: GitRunner | None = None) -> None:
        self.path = path
        self.git = runner or GitRunner(path)
        self._objects = ObjectReader(self.git)
        self._objects_dir: Path | Literal[False] | None = None
        self._git_dir: Path | None = None
        self._common_dir: Path | None = None
        self._objects_path: Path | None = None
        # (ancestor, descendant) -> answer, for object ids only: commits never change
        self._ancestry: dict[tuple[str, str], bool] = {}
        # object id -> parsed commit, and a folder's tree content digest -> its files: objects
        # never change, and a candidate chain walks the same commits and folders again
        self._commits: dict[str, CommitInfo] = {}
        self._folders: dict[bytes, dict[str, str]] = {}
        # tree id -> its entries (name -> canonical mode, id), for diffs read in-process
        self._trees: dict[str, dict[str, tuple[str, str]]] = {}

    def close(self) -> None:
        self._objects.close()

    def git_directory(self) -> Path:
        """This repository's git directory, absolute."""
        if self._git_dir is None:
            found = self.git.output(["rev-parse", "--absolute-git-dir"]).strip()
            self._git_dir = Path(found)
        return self._git_dir

    def common_directory(self) -> Path:
        """The git directory shared by all worktrees of this repository, absolute."""
        if self._common_dir is None:
            found = self.git.output(["rev-parse", "--git-common-dir"]).strip()
            self._common_dir = (self.path / found).resolve()
        return self._common_dir

    def objects_directory(self) -> Path:
        """Where this repository keeps its objects, absolute (shared by linked worktrees)."""
        if self._objects_path is None:
            found = self.git.output(["rev-parse", "--git-path", "objects"]).strip()
            self._objects_path = (self.path / found).resolve()
        return self._objects_path

    def __del__(self) -> None:
        self._objects.close()

    # -- reading -------------------------------------------------------------------------
    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names, or None when it names nothing."""
        result = self.git.run(["rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], ok_codes=(0, 1))
        return result.stdout.strip() or None

    def _loose_objects(self) -> Path | None:
        """Where this SHA-1 repository keeps loose objects; None for other object formats."""
        if self._objects_dir is None:
            found = self.git.output(["rev-parse", "--show-object-format", "--git-path", "objects"])
            object_format, objects = found.splitlines()
            self._objects_dir = (self.path / objects) if object_format == "sha1" else False
        return self._objects_dir or None
