"""Many small files under one git tree, fanned out so that changing a few writes a few objects.

A file `<name>` lives at `<a>/<b>/<name>`, where `a` and `b` are the first two hex digits of
the SHA-1 of its name: 256 leaf trees of a few entries under 16 + 1 small trees. Changing one
file writes its blob, its leaf, one middle tree and the top tree — a few hundred bytes whatever
the number of files — where one big JSON file would be written whole on every change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from imm_action.git.repo import GitRepo

BLOB_MODE = "100644"
TREE_MODE = "40000"

Entry = tuple[str, str, str]  # name, mode, object id


def tree_body(entries: list[Entry]) -> bytes:
    """Git's binary tree format; entries sorted as git sorts them (a tree as `name/`)."""

    def key(entry: Entry) -> bytes:
        name, mode, _ = entry
        return name.encode("utf-8") + (b"/" if mode == TREE_MODE else b"")

    return b"".join(
        mode.encode() + b" " + name.encode("utf-8") + b"\0" + bytes.fromhex(oid)
        for name, mode, oid in sorted(entries, key=key)
    )


def bucket(name: str) -> tuple[str, str]:
    digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest[0], digest[1]


@dataclass(frozen=True)
class FanoutTree:
    """An immutable fan-out tree: which blob each name has, and the ids of the trees."""

    leaves: Mapping[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)
    leaf_ids: Mapping[tuple[str, str], str] = field(default_factory=dict)
    middle_ids: Mapping[str, str] = field(default_factory=dict)
    oid: str | None = None  # the top tree; None while empty

    def files(self) -> Iterator[tuple[str, str]]:
        for leaf in self.leaves.values():
            yield from leaf.items()

    def get(self, name: str) -> str | None:
        return self.leaves.get(bucket(name), {}).get(name)

    @classmethod
    def from_listing(cls, repo: GitRepo, listing: Mapping[str, str]) -> FanoutTree:
        """The tree whose files are `listing` (`a/b/name` -> blob id), as read from git: the
        tree ids are computed, not written (they exist already)."""
        changes = {path.rsplit("/", 1)[-1]: oid for path, oid in listing.items()}
        return cls().with_files(repo, changes, write=False)

    def with_files(
        self, repo: GitRepo, changes: Mapping[str, str | None], *, write: bool = True
    ) -> FanoutTree:
        """This tree with `changes` applied (name -> blob id, None removes): only the trees on
        the changed paths are made."""
        if not changes:
            return self
        make = repo.write_object if write else repo.hash_object
        leaves = dict(self.leaves)
        touched: set[tuple[str, str]] = set()
        for name, oid in changes.items():
            where = bucket(name)
            leaf = dict(leaves.get(where, {}))
            if oid is None:
                leaf.pop(name, None)
            else:
                leaf[name] = oid
            leaves[where] = leaf
            touched.add(where)
        leaf_ids = dict(self.leaf_ids)
        for where in touched:
            if leaves[where]:
                entries = [(name, BLOB_MODE, oid) for name, oid in leaves[where].items()]
                leaf_ids[where] = make("tree", tree_body(entries))
            else:
                del leaves[where]
                leaf_ids.pop(where, None)
        middle_ids = dict(self.middle_ids)
        for first in {where[0] for where in touched}:
            entries = [(b, TREE_MODE, oid) for (a, b), oid in leaf_ids.items() if a == first]
            if entries:
                middle_ids[first] = make("tree", tree_body(entries))
            else:
                middle_ids.pop(first, None)
        top = [(a, TREE_MODE, oid) for a, oid in middle_ids.items()]
        oid = make("tree", tree_body(top)) if top else None
        return FanoutTree(leaves, leaf_ids, middle_ids, oid)


def make_tree(repo: GitRepo, entries: Mapping[str, tuple[Literal["blob", "tree"], str]]) -> str:
    """A tree of named blobs and trees (name -> (kind, id))."""
    return repo.write_object(
        "tree",
        tree_body(
            [
                (name, BLOB_MODE if kind == "blob" else TREE_MODE, oid)
                for name, (kind, oid) in entries.items()
            ]
        ),
    )
