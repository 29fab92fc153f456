"""Writing objects (never refs): merged trees, commits, blobs and trees — loose objects written
in-process for SHA-1 repositories — and packing them."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from typing import Literal

from imm_action.git.errors import GitFatal
from imm_action.git.objects import IMM_IDENTITY, Identity, MergeResult
from imm_action.git.reading import ObjectReading


class ObjectWriting(ObjectReading):
    # -- writing objects (never refs) ----------------------------------------------------
    def merge_trees(self, ours: str, theirs: str) -> MergeResult:
        """Three-way merge of two commits with their (single, proven) merge base, in the
        object store only: no worktree, no index. Callers must have resolved both commits,
        since merge-tree's exit 1 also means a bad name."""
        result = self.git.run(
            ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs],
            ok_codes=(0, 1),
        )
        lines = result.stdout.split("\n")
        conflicts = tuple(line for line in lines[1:] if line) if result.exit_code == 1 else ()
        return MergeResult(tree=lines[0].strip(), conflicts=conflicts)

    def commit_tree(
        self,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        author: Identity,
        author_date: str,
        committer: Identity = IMM_IDENTITY,
        committer_date: str,
    ) -> str:
        """A commit whose every input is given, so the same call always yields the same id."""
        if self._loose_objects() is not None:
            lines = [f"tree {tree}", *(f"parent {parent}" for parent in parents)]
            lines.append(f"author {author.name} <{author.email}> {author_date}")
            lines.append(f"committer {committer.name} <{committer.email}> {committer_date}")
            return self._write_loose("commit", ("\n".join(lines) + "\n\n" + message).encode())
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        env = {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_AUTHOR_DATE": author_date,
            "GIT_COMMITTER_NAME": committer.name,
            "GIT_COMMITTER_EMAIL": committer.email,
            "GIT_COMMITTER_DATE": committer_date,
        }
        return self.git.output([*args, "-F", "-"], input_text=message, env=env).strip()

    def _write_loose(self, kind: str, body: bytes) -> str:
        """Write one object the way git does (zlib of `<kind> <size>\\0<body>`, named by its
        SHA-1, moved into place read-only). A candidate is written on every integration, and a
        `commit-tree` process per candidate was a third of the integrator's overhead."""
        data = f"{kind} {len(body)}\0".encode() + body
        oid = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        objects = self._loose_objects()
        if objects is None:  # callers check first: only SHA-1 repositories are written this way
            raise GitFatal(["hash-object"], None, "loose objects are written for SHA-1 only")
        target = objects / oid[:2] / oid[2:]
        if target.exists():
            return oid
        target.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix="tmp_obj_")
        with os.fdopen(handle, "wb") as out:
            out.write(zlib.compress(data))
        os.chmod(temporary, 0o444)
        os.replace(temporary, target)
        return oid

    def write_blob(self, text: str) -> str:
        if self._loose_objects() is not None:
            return self._write_loose("blob", text.encode("utf-8"))
        return self.git.output(["hash-object", "-w", "--stdin"], input_text=text).strip()

    def write_tree(self, files: Mapping[str, str]) -> str:
        """A flat tree of text files (name -> content)."""
        if self._loose_objects() is not None:
            # Tree entries of plain files sort by name bytes: `<mode> <name>\0<binary id>`.
            body = b"".join(
                b"100644 "
                + name.encode("utf-8")
                + b"\0"
                + bytes.fromhex(self.write_blob(files[name]))
                for name in sorted(files, key=lambda name: name.encode("utf-8"))
            )
            return self._write_loose("tree", body)
        entries = "".join(
            f"100644 blob {self.write_blob(content)}\t{name}\n"
            for name, content in sorted(files.items())
        )
        return self.git.output(["mktree"], input_text=entries).strip()

    def write_object(self, kind: Literal["blob", "tree"], body: bytes) -> str:
        """One object from its raw body (a tree body is git's binary entry list)."""
        if self._loose_objects() is not None:
            return self._write_loose(kind, body)
        return self._pipe(["hash-object", "-t", kind, "-w", "--stdin"], body)

    def hash_object(self, kind: Literal["blob", "tree"], body: bytes) -> str:
        """The id `body` has (or would have) as an object, without writing it."""
        if self._loose_objects() is not None:
            data = f"{kind} {len(body)}\0".encode() + body
            return hashlib.sha1(data, usedforsecurity=False).hexdigest()
        return self._pipe(["hash-object", "-t", kind, "--stdin"], body)

    def _pipe(self, args: list[str], body: bytes) -> str:
        process = self.git.spawn(args)
        out, _ = process.communicate(body)
        if process.returncode != 0:
            raise GitFatal(args, process.returncode, "could not write an object")
        return out.decode().strip()

    def pack_loose_objects(self, at_least: int = 2) -> None:
        """Put every loose object into one new pack and drop the loose copies: work in the
        number of loose objects, not in the repository's size, and safe while others write
        (an object written meanwhile stays loose; a loose copy goes only once packed). Fewer
        than `at_least` loose objects stay as they are."""
        objects = self.objects_directory()
        names = []
        for folder in os.listdir(objects):
            if len(folder) == 2:
                with contextlib.suppress(OSError):
                    names += [
                        folder + name
                        for name in os.listdir(objects / folder)
                        if not name.startswith("tmp_")
                    ]
        if len(names) < max(2, at_least):
            return
        pack = str(objects / "pack" / "pack")
        self.git.run(
            ["pack-objects", "-q", "--window=10", pack], input_text="\n".join(names) + "\n"
        )
        self.git.run(["prune-packed", "-q"])
