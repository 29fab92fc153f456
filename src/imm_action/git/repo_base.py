"""What every part of a repository shares: where it is, its git, its object reader and what it
found out about its objects (which never change)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imm_action.git.objects import CommitInfo, ObjectReader
from imm_action.git.runner import GitRunner


@dataclass(frozen=True)
class RepoLayout:
    git_dir: Path
    common_dir: Path  # shared by all worktrees
    objects_dir: Path
    object_format: str  # "sha1" or "sha256"


class RepoBase:
    def __init__(self, path: Path, runner: GitRunner | None = None) -> None:
        self.path = path
        self.git = runner or GitRunner(path)
        self._objects = ObjectReader(self.git)
        self._layout: RepoLayout | None = None
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

    def layout(self) -> RepoLayout:
        """Where this repository keeps its git directory and objects: asked of git once, in one
        process (a repository's layout does not change while imm works in it)."""
        if self._layout is None:
            asked = ["--absolute-git-dir", "--git-common-dir", "--show-object-format"]
            found = self.git.output(["rev-parse", *asked, "--git-path", "objects"]).splitlines()
            git_dir, common, object_format, objects = found[:4]
            self._layout = RepoLayout(
                Path(git_dir),
                (self.path / common).resolve(),
                (self.path / objects).resolve(),
                object_format,
            )
        return self._layout

    def git_directory(self) -> Path:
        """This repository's git directory, absolute."""
        return self.layout().git_dir

    def common_directory(self) -> Path:
        """The git directory shared by all worktrees of this repository, absolute."""
        return self.layout().common_dir

    def objects_directory(self) -> Path:
        """Where this repository keeps its objects, absolute (shared by linked worktrees)."""
        return self.layout().objects_dir

    def __del__(self) -> None:
        self._objects.close()

    # -- reading -------------------------------------------------------------------------
    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names, or None when it names nothing."""
        result = self.git.run(["rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], ok_codes=(0, 1))
        return result.stdout.strip() or None

    def _loose_objects(self) -> Path | None:
        """Where this SHA-1 repository keeps loose objects; None for other object formats."""
        layout = self.layout()
        return layout.objects_dir if layout.object_format == "sha1" else None
