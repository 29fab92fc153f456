"""Reading a repository's objects: commits and their ancestry, files, folders, trees and the
change between two of them — through the object reader, rarely a process."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from imm_action.git.errors import GitFatal
from imm_action.git.objects import (
    ANCESTRY_LIMIT,
    COMMIT_LIMIT,
    FOLDER_LIMIT,
    FOLDER_MODE,
    GONE_MODE,
    OBJECT_ID,
    TREE_LIMIT,
    CommitInfo,
    Identity,
    TreeEntry,
    parse_person,
    raw_tree_entries,
    raw_tree_files,
)
from imm_action.git.repo_base import RepoBase


class ObjectReading(RepoBase):
    def commit(self, oid: str) -> CommitInfo:
        """A commit's fields, read from the raw object (`cat-file` is the cheapest reader)."""
        known = self._commits.get(oid)
        if known is not None:
            return known
        info = self._read_commit(oid)
        if OBJECT_ID.fullmatch(oid):
            if len(self._commits) >= COMMIT_LIMIT:
                self._commits.clear()
            self._commits[oid] = info
        return info

    def _read_commit(self, oid: str) -> CommitInfo:
        found = self._objects.read(oid)
        if found is None or found[0] != "commit":
            raise GitFatal(["cat-file", "commit", oid], 128, f"no commit {oid}")
        raw = found[1].decode("utf-8", "surrogateescape")
        header, _, message = raw.partition("\n\n")
        fields: dict[str, list[str]] = {}
        for line in header.splitlines():
            key, _, value = line.partition(" ")
            fields.setdefault(key, []).append(value)
        try:
            author_name, author_email, author_date = parse_person(fields["author"][0])
            committer_name, committer_email, committer_date = parse_person(fields["committer"][0])
            tree = fields["tree"][0]
        except (KeyError, ValueError):
            raise GitFatal(["cat-file", "commit", oid], 0, f"unreadable commit {oid}") from None
        resolved = self.resolve(oid) if len(oid) != 40 else oid
        return CommitInfo(
            oid=resolved or oid,
            tree=tree,
            parents=tuple(fields.get("parent", [])),
            author=Identity(author_name, author_email),
            author_date=author_date,
            committer_date=committer_date,
            message=message.rstrip("\n") + "\n",
            committer=Identity(committer_name, committer_email),
        )

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        key = (ancestor, descendant)
        known = self._ancestry.get(key)
        if known is not None:
            return known
        result = self.git.run(
            ["merge-base", "--is-ancestor", ancestor, descendant], ok_codes=(0, 1)
        )
        answer = result.exit_code == 0
        if OBJECT_ID.fullmatch(ancestor) and OBJECT_ID.fullmatch(descendant):
            if len(self._ancestry) >= ANCESTRY_LIMIT:
                self._ancestry.clear()
            self._ancestry[key] = answer
        return answer

    def commit_if_present(self, oid: str) -> CommitInfo | None:
        """The commit `oid` names, or None when there is none (or it is no commit)."""
        try:
            return self.commit(oid)
        except GitFatal:
            return None

    def descends_linearly(self, head: str, ancestor: str, avoid: str, limit: int = 256) -> bool:
        """Whether `head` reaches `ancestor` through single-parent commits, none of them `avoid`.

        Read through the object reader (no process). When it holds for a lane (`avoid` = the
        lane commit, whose only parent is `ancestor`), the lane base is the sole merge base of
        head and lane commit: ancestors(head) are that chain plus ancestors(lane base), which
        cannot contain the lane commit. False means "not shown", not "disproved"."""
        current = head
        for _ in range(limit):
            if current == ancestor:
                return True
            if current == avoid:
                return False
            parents = self.commit(current).parents
            if len(parents) != 1:
                return False
            current = parents[0]
        return False

    def merge_bases(self, left: str, right: str) -> list[str]:
        result = self.git.run(["merge-base", "--all", left, right], ok_codes=(0, 1))
        return result.stdout.split()

    def commits_between(self, start: str, end: str) -> list[str]:
        """Commits reachable from `end` but not from `start`, oldest first."""
        return self.git.output(["rev-list", "--reverse", f"{start}..{end}", "--"]).split()

    def read_file(self, commit: str, path: str) -> str | None:
        found = self._objects.read(f"{commit}:{path}")
        if found is None or found[0] != "blob":
            return None
        return found[1].decode("utf-8", "surrogateescape")

    def folder_files(self, commit: str, folder: str) -> dict[str, str] | None:
        """The files (and links) directly in `folder` of `commit`: name -> blob id, read through
        the object reader and kept by the folder's content (the intents' folder is the same in
        every candidate of a chain). None when `folder` is no folder there."""
        found = self._objects.read(f"{commit}:{folder}")
        if found is None or found[0] != "tree":
            return None
        body = found[1]
        key = hashlib.sha256(body).digest()
        known = self._folders.get(key)
        if known is None:
            known = raw_tree_files(body, self._object_id_size())
            if len(self._folders) >= FOLDER_LIMIT:
                self._folders.clear()
            self._folders[key] = known
        return known

    def _object_id_size(self) -> int:
        return 20 if self.layout().object_format == "sha1" else 32

    def tree_entries(
        self, commit: str, paths: Sequence[str], *, recursive: bool
    ) -> dict[str, TreeEntry]:
        """`ls-tree` of `commit` limited to `paths` (repository-relative)."""
        args = ["ls-tree", "-z", "--long", "--full-tree"]
        listing = self.git.output([*args, *(["-r"] if recursive else []), commit, "--", *paths])
        entries = {}
        for record in listing.split("\0"):
            if not record:
                continue
            info, _, path = record.partition("\t")
            mode, _, oid, size = info.split()
            entries[path] = TreeEntry(mode, oid, int(size) if size.isdigit() else None)
        return entries

    def read_blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        """Many blobs in one `cat-file --batch` process: oid -> content."""
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        done = self.git.run_bytes(
            ["cat-file", "--batch", "--buffer"], "".join(f"{o}\n" for o in wanted)
        )
        blobs: dict[str, bytes] = {}
        at = 0
        for oid in wanted:
            end = done.index(b"\n", at)
            header = done[at:end].split()
            at = end + 1
            if len(header) != 3:
                continue  # missing
            size = int(header[2])
            blobs[oid] = done[at : at + size]
            at += size + 1
        return blobs

    def change_identity(self, start: str, end: str) -> dict[str, str]:
        """Per changed path, the mode and blob it has at `end`: what a change *is*, whatever
        commit carries it (SPEC §5.4)."""
        return self.change_identities([(start, end)])[0]

    def tree_change(self, start: str, end: str, added: set[str] | None = None) -> dict[str, str]:
        """`change_identity` of two tree-ishes (commits or trees), as `git diff-tree -r
        --no-renames` finds it, read through the long-lived `cat-file` rather than a process
        per diff: a stack of 256 candidates is diffed twice per candidate, and a diff only
        descends into folders whose ids differ. `added` collects the paths `start` held no
        file, link or gitlink at (new files)."""
        change: dict[str, str] = {}
        self._diff_trees(self._root_tree(start), self._root_tree(end), "", change, added)
        return change

    def change_identities(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
        """`change_identity` of several pairs of commits."""
        return [self.tree_change(start, end) for start, end in pairs]

    def tree_of(self, name: str) -> str:
        """The tree `name` (a commit or a tree) is, read through the open object reader."""
        return self._root_tree(name)

    def _root_tree(self, name: str) -> str:
        found = self._objects.read_named(f"{name}^{{tree}}")
        if found is None or found[1] != "tree":
            raise GitFatal(["cat-file", "tree", name], 128, f"no tree-ish {name}")
        oid, _, body = found
        self._remember_tree(oid, body)
        return oid

    def _tree(self, oid: str) -> dict[str, tuple[str, str]]:
        known = self._trees.get(oid)
        if known is not None:
            return known
        found = self._objects.read_named(oid)
        if found is None or found[1] != "tree":
            raise GitFatal(["cat-file", "tree", oid], 128, f"no tree {oid}")
        return self._remember_tree(oid, found[2])

    def _remember_tree(self, oid: str, body: bytes) -> dict[str, tuple[str, str]]:
        known = self._trees.get(oid)
        if known is None:
            known = raw_tree_entries(body, len(oid) // 2)
            if len(self._trees) >= TREE_LIMIT:
                self._trees.clear()
            self._trees[oid] = known
        return known

    def _diff_trees(
        self,
        old: str | None,
        new: str | None,
        prefix: str,
        change: dict[str, str],
        added: set[str] | None = None,
    ) -> None:
        """Every non-folder entry that differs between two trees (either None: absent), with
        its new mode and id (`000000` and a zero id when gone); a folder on one side and not
        the other is its files gone or added, and the other side's entry added or gone."""
        if old == new:
            return
        before = self._tree(old) if old is not None else {}
        after = self._tree(new) if new is not None else {}
        for name in before.keys() | after.keys():
            was, now = before.get(name), after.get(name)
            if was == now:
                continue
            path = prefix + name
            was_folder = was is not None and was[0] == FOLDER_MODE
            now_folder = now is not None and now[0] == FOLDER_MODE
            if was_folder or now_folder:
                self._diff_trees(
                    was[1] if was is not None and was_folder else None,
                    now[1] if now is not None and now_folder else None,
                    path + "/",
                    change,
                    added,
                )
            if now is not None and not now_folder:
                change[path] = f"{now[0]} {now[1]}"
                if added is not None and (was is None or was_folder):
                    added.add(path)
            elif was is not None and not was_folder:
                change[path] = f"{GONE_MODE} {'0' * len(was[1])}"

    def list_blobs(self, commit: str) -> dict[str, str]:
        """Every file of a commit's tree (path -> blob id), in one process."""
        listing = self.git.output(["ls-tree", "-r", "-z", "--full-tree", commit])
        files: dict[str, str] = {}
        for entry in listing.split("\0"):
            if entry:
                info, path = entry.split("\t", 1)
                files[path] = info.split(" ")[2]
        return files

    def read_blob(self, oid: str) -> bytes | None:
        found = self._objects.read(oid)
        return found[1] if found is not None and found[0] == "blob" else None

    def changed_paths(self, start: str, end: str) -> list[str]:
        """Paths that differ between two tree-ishes."""
        listing = self.git.output(
            ["diff-tree", "-r", "-z", "--name-only", "--no-renames", start, end]
        )
        return sorted(path for path in listing.split("\0") if path)
