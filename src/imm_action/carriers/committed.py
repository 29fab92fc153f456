"""The imm files of one commit: the one source of truth for initiatives and intents (issue 12).

`plan`, `check` and `run` read `docs/initiatives/*.md` and `docs/plans/*.intent.json` from the
commit a batch starts from (HEAD for `plan` and `check`), never from the working tree, so what
`check` passes is exactly what the lanes will read. The SPEC §4.2 file rules apply to the tree
entries: a regular file (a symlink — mode 120000 — is refused, as is a link on the folders'
path), at most the size limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from imm_action.errors import UsageError
from imm_action.git.repo import GitRepo, TreeEntry

PLANS = "docs/plans"
INITIATIVES = "docs/initiatives"
UNCOMMITTED_NOTE = "imm reads committed files; commit your change to use it"


@dataclass
class CommittedInputs:
    """Initiatives and intents at `commit`, for a project at `prefix` (`""` or `"sub/dir/"`)
    of the repository."""

    repo: GitRepo
    commit: str
    prefix: str
    project: Path  # the project folder on disk, only to tell "not committed" from "missing"
    _entries: dict[str, TreeEntry] = field(default_factory=dict)
    _folders: dict[str, TreeEntry] = field(default_factory=dict)
    _blobs: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        full = [self.prefix + PLANS, self.prefix + INITIATIVES]
        for path, entry in self.repo.tree_entries(self.commit, full, recursive=True).items():
            self._entries[path.removeprefix(self.prefix)] = entry
        folders = [self.prefix + "docs", *full]
        for path, entry in self.repo.tree_entries(self.commit, folders, recursive=False).items():
            self._folders[path.removeprefix(self.prefix)] = entry

    # -- what is there ---------------------------------------------------------------------
    def folder_link(self, folder: str) -> str | None:
        """The first folder on the way to `folder` (e.g. `docs/plans`) that is a symlink."""
        parts = folder.split("/")
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            entry = self._folders.get(path)
            if entry is not None and entry.is_link:
                return path
        return None

    def entry(self, relative: str) -> TreeEntry | None:
        return self._entries.get(relative)

    def names_in(self, folder: str, suffix: str) -> list[str]:
        """File names directly in `folder` ending with `suffix`, sorted (any entry kind)."""
        found = []
        for path in self._entries:
            parent, _, name = path.rpartition("/")
            if parent == folder and name.endswith(suffix):
                found.append(name)
        return sorted(found)

    def in_working_tree(self, relative: str) -> bool:
        return (self.project / relative).exists()

    # -- contents --------------------------------------------------------------------------
    def prefetch(self, relatives: Iterable[str]) -> None:
        """Read many files in one git process."""
        wanted = {}
        for relative in relatives:
            entry = self._entries.get(relative)
            if entry is not None and entry.is_file and entry.oid not in self._blobs:
                wanted[entry.oid] = relative
        self._blobs.update(self.repo.read_blobs(wanted))

    def read(self, relative: str) -> bytes | None:
        entry = self._entries.get(relative)
        if entry is None or not entry.is_file:
            return None
        if entry.oid not in self._blobs:
            self.prefetch([relative])
        return self._blobs.get(entry.oid)


def committed_inputs(project: Path, commit: str | None = None) -> CommittedInputs:
    """The initiatives and intents of `commit` (default HEAD) for the project at `project`.

    A commit never changes, so what was read of it is kept: `imm run` plans again on every
    pass, mostly at the same base commit, and each reading costs git processes."""
    repo = GitRepo(project)
    at = repo.resolve(commit or "HEAD")
    if at is None:
        raise UsageError(
            f"{commit or 'HEAD'} names no commit: {UNCOMMITTED_NOTE} (make a first commit)"
        )
    key = (str(project), at)
    found = _READ.get(key)
    if found is None:
        found = CommittedInputs(repo, at, project_prefix(repo, project), project)
        if len(_READ) >= _KEEP:
            _READ.pop(next(iter(_READ)))
        _READ[key] = found
    else:
        repo.close()
    return found


_KEEP = 8
_READ: dict[tuple[str, str], CommittedInputs] = {}


def project_prefix(repo: GitRepo, project: Path) -> str:
    """`project`'s path inside the repository, with a trailing slash (or "")."""
    return repo.git.output(["rev-parse", "--show-prefix"]).strip() if project else ""


def uncommitted_inputs(repo: GitRepo, prefix: str) -> list[str]:
    """Initiative and intent files whose working-tree state differs from HEAD (untracked too)."""
    listing = repo.git.output(
        ["status", "--porcelain", "-z", "--untracked-files=all", "--",
         f":/{prefix}{INITIATIVES}", f":/{prefix}{PLANS}"]
    )  # fmt: skip
    paths = []
    for record in listing.split("\0"):
        if len(record) > 3 and record[2] == " ":
            paths.append(record[3:])
    return sorted(paths)
