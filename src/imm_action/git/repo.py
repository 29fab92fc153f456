"""Git operations the integrator needs, on one repository, through `GitRunner`."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from imm_action.git.errors import GitConflict, GitFatal
from imm_action.git.ref_files import read_head_branch, read_ref_files
from imm_action.git.runner import IMM_GIT_MARK, GitRunner

ZERO_OID = "0" * 40
# Where imm's refs live (batch branches, lane branches, batch state and outcomes, the mirror of
# a remote's): only imm writes there, always under the ref lock.
IMM_REF_NAMESPACES = ("refs/heads/imm", "refs/heads/imm-lane", "refs/imm", "refs/imm-mirror")


@dataclass(frozen=True)
class Identity:
    name: str
    email: str


IMM_IDENTITY = Identity("imm-action", "imm-action@users.noreply.github.com")


@dataclass(frozen=True)
class RefUpdate:
    """Move `ref` from `old` to `new`; None for `old` means "must not exist", for `new` "delete"."""

    ref: str
    new: str | None
    old: str | None


@dataclass(frozen=True)
class CommitInfo:
    oid: str
    tree: str
    parents: tuple[str, ...]
    author: Identity
    author_date: str  # raw git date ("<unix> <tz>"), so rebuilt commits keep it exactly
    committer_date: str
    message: str
    committer: Identity = IMM_IDENTITY

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


@dataclass(frozen=True)
class TreeEntry:
    mode: str  # "100644", "100755", "120000" (link), "040000" (tree), "160000" (gitlink)
    oid: str
    size: int | None  # blobs only

    @property
    def is_file(self) -> bool:
        return self.mode in ("100644", "100755")

    @property
    def is_link(self) -> bool:
        return self.mode == "120000"


@dataclass(frozen=True)
class MergeResult:
    tree: str
    conflicts: tuple[str, ...]  # empty when the merge is clean


def _person(value: str) -> tuple[str, str, str]:
    """`Name <email> 1700000000 +0000` -> (name, email, raw date)."""
    name, _, rest = value.partition(" <")
    email, _, date = rest.partition("> ")
    if not date:
        raise ValueError(value)
    return name, email, date


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_ANCESTRY_LIMIT = 100_000
_COMMIT_LIMIT = 20_000  # parsed commits kept (a few hundred bytes each)
_FOLDER_LIMIT = 64  # folder listings kept, by their content
_TREE_LIMIT = 4096  # parsed trees kept for diffs (a stack's candidates share most of theirs)
FOLDER_MODE = "040000"
GONE_MODE = "000000"

ChangeIdentity = Mapping[str, str]  # path -> "<mode> <blob>" of the new side ("000000 000…" = gone)


class _ObjectReader:
    """One long-lived `git cat-file --batch`: reading an object costs a pipe round trip
    instead of a process (the integrator reads commits, intents and states on every pass)."""

    def __init__(self, runner: GitRunner) -> None:
        self._runner = runner
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def read(self, name: str) -> tuple[str, bytes] | None:
        found = self.read_named(name)
        return None if found is None else found[1:]

    def read_named(self, name: str) -> tuple[str, str, bytes] | None:
        """The object `name` names: its id, kind and content; None when there is none."""
        if "\n" in name:
            return None
        with self._lock:
            process = self._start()
            if process.stdin is None or process.stdout is None:
                raise GitFatal(["cat-file", "--batch"], None, "cat-file has no pipes")
            process.stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
            process.stdin.flush()
            header = process.stdout.readline().decode()
            if not header or header.endswith(("missing\n", "ambiguous\n")):
                if not header:
                    self.close()
                    raise GitFatal(["cat-file", "--batch"], None, "cat-file ended unexpectedly")
                return None
            oid, kind, size = header.split()
            data = process.stdout.read(int(size) + 1)[:-1]
            return oid, kind, data

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            self._process = self._runner.spawn(["cat-file", "--batch"])
        return self._process

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            # Ended, not waited for: a lane forked from this process holds our end of its
            # stdin too, so it would see no end of input until that lane ends — and a close
            # from a garbage collection inside the ref lock would wait for a lane that waits
            # for the ref lock. It only reads: nothing is lost.
            with contextlib.suppress(OSError):
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


class GitRepo:
    def __init__(self, path: Path, runner: GitRunner | None = None) -> None:
        self.path = path
        self.git = runner or GitRunner(path)
        self._objects = _ObjectReader(self.git)
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

    def forked(self) -> GitRepo:
        """This repository for a process forked from ours: what was found about it (its git
        directory, object store) and the objects read so far, but its own object reader — a
        `cat-file` process serves the process that started it only."""
        copy = GitRepo(self.path, self.git)
        copy._objects_dir = self._objects_dir
        copy._git_dir = self._git_dir
        copy._common_dir = self._common_dir
        copy._objects_path = self._objects_path
        # facts about immutable objects: shared, not copied (a fork has its own memory anyway)
        copy._ancestry = self._ancestry
        copy._commits = self._commits
        copy._folders = self._folders
        copy._trees = self._trees
        return copy

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

    def configured_identity(self) -> Identity | None:
        """The user's `user.name` and `user.email` as this repository's git sees them; None
        when either is unset."""
        values = [
            self.git.run(["config", "--get", key], ok_codes=(0, 1)).stdout.strip()
            for key in ("user.name", "user.email")
        ]
        return Identity(values[0], values[1]) if all(values) else None

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

    def list_refs(self, prefix: str) -> dict[str, str]:
        """Every ref under `prefix` (a folder like `refs/imm/batches/`) with its object id."""
        listing = self.git.output(["for-each-ref", "--format=%(objectname) %(refname)", prefix])
        refs = {}
        for line in listing.splitlines():
            oid, name = line.split(" ", 1)
            refs[name] = oid
        return refs

    def read_refs(self, names: Iterable[str]) -> dict[str, str | None]:
        wanted = list(names)
        found: dict[str, str | None] = dict.fromkeys(wanted)
        if not wanted:
            return found
        # the files themselves where git keeps them plainly (ref_files.py), else git
        direct = read_ref_files(self.common_directory(), wanted)
        if direct is not None:
            return direct
        listing = self.git.output(["for-each-ref", "--format=%(objectname) %(refname)", *wanted])
        for line in listing.splitlines():
            oid, name = line.split(" ", 1)
            if name in found:
                found[name] = oid
        return found

    def commit(self, oid: str) -> CommitInfo:
        """A commit's fields, read from the raw object (`cat-file` is the cheapest reader)."""
        known = self._commits.get(oid)
        if known is not None:
            return known
        info = self._read_commit(oid)
        if _OBJECT_ID.fullmatch(oid):
            if len(self._commits) >= _COMMIT_LIMIT:
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
            author_name, author_email, author_date = _person(fields["author"][0])
            committer_name, committer_email, committer_date = _person(fields["committer"][0])
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

    def current_branch(self) -> str | None:
        """The branch HEAD is on (`main`, not `refs/heads/main`); None when HEAD is detached."""
        full = read_head_branch(self.git_directory(), self.common_directory())
        if full is not None:
            return full.removeprefix("refs/heads/")
        found = self.git.run(["symbolic-ref", "--short", "-q", "HEAD"], ok_codes=(0, 1))
        return found.stdout.strip() or None

    def branch_head(self, branch: str) -> str | None:
        """The commit `refs/heads/<branch>` points to, else the commit `branch` names."""
        full = f"refs/heads/{branch}"
        found = self.read_refs([full])[full]
        if found is not None and self.commit_if_present(found) is not None:
            return found
        return self.resolve(full) or self.resolve(branch)

    def can_name(self, ref: str) -> bool:
        """Whether git accepts `ref` as a full ref name (`git check-ref-format`)."""
        return self.git.run(["check-ref-format", ref], ok_codes=(0, 1)).exit_code == 0

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        key = (ancestor, descendant)
        known = self._ancestry.get(key)
        if known is not None:
            return known
        result = self.git.run(
            ["merge-base", "--is-ancestor", ancestor, descendant], ok_codes=(0, 1)
        )
        answer = result.exit_code == 0
        if _OBJECT_ID.fullmatch(ancestor) and _OBJECT_ID.fullmatch(descendant):
            if len(self._ancestry) >= _ANCESTRY_LIMIT:
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
            known = _tree_files(body, self._object_id_size())
            if len(self._folders) >= _FOLDER_LIMIT:
                self._folders.clear()
            self._folders[key] = known
        return known

    def _object_id_size(self) -> int:
        return 20 if self._loose_objects() is not None else 32

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

    def tree_change(self, start: str, end: str) -> dict[str, str]:
        """`change_identity` of two tree-ishes (commits or trees), as `git diff-tree -r
        --no-renames` finds it, read through the long-lived `cat-file` rather than a process
        per diff: a stack of 256 candidates is diffed twice per candidate, and a diff only
        descends into folders whose ids differ."""
        change: dict[str, str] = {}
        self._diff_trees(self._root_tree(start), self._root_tree(end), "", change)
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
            known = _tree_entries(body, len(oid) // 2)
            if len(self._trees) >= _TREE_LIMIT:
                self._trees.clear()
            self._trees[oid] = known
        return known

    def _diff_trees(
        self, old: str | None, new: str | None, prefix: str, change: dict[str, str]
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
                )
            if now is not None and not now_folder:
                change[path] = f"{now[0]} {now[1]}"
            elif was is not None and not was_folder:
                change[path] = f"{GONE_MODE} {'0' * len(was[1])}"

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

    def _loose_objects(self) -> Path | None:
        """Where this SHA-1 repository keeps loose objects; None for other object formats."""
        if self._objects_dir is None:
            found = self.git.output(["rev-parse", "--show-object-format", "--git-path", "objects"])
            object_format, objects = found.splitlines()
            self._objects_dir = (self.path / objects) if object_format == "sha1" else False
        return self._objects_dir or None

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

    def pack_loose_objects(self, at_least: int = 2) -> None:
        """Put every loose object into one new pack and drop the loose copies: work in the
        number of loose objects, not in the repository's size, and safe while others write
        (an object written meanwhile stays loose; a loose copy goes only once packed). Fewer
        than `at_least` loose objects stay as they are."""
        objects = (
            self._loose_objects()
            or self.path / self.git.output(["rev-parse", "--git-path", "objects"]).strip()
        )
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

    # -- refs ----------------------------------------------------------------------------
    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        """Move every ref at once or none: one `update-ref --stdin` transaction. A ref not at
        its expected old value makes the whole transaction fail with GitConflict.

        git's files backend commits a transaction by renaming one lock file after the other,
        so a process killed in that phase leaves the refs after it unmoved, with their `.lock`
        files behind — which git never removes and which make every later update of that ref
        fail. Our writers therefore hold the repository's ref lock, under which a `.lock` in
        imm's namespaces can only be the debris of a killed writer and is cleared; callers
        order their updates so that a prefix of them is a state a pass can recover from."""
        with self.refs_locked():
            self._compare_and_swap(updates)

    def _compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        lines = ["start"]
        for update in updates:
            old = update.old or ZERO_OID
            if update.new is None:
                lines.append(f"delete {update.ref} {old}")
            else:
                lines.append(f"update {update.ref} {update.new} {old}")
        lines += ["prepare", "commit", ""]
        result = self.git.run(
            ["update-ref", "--stdin"], input_text="\n".join(lines), ok_codes=(0, 1, 128)
        )
        if result.exit_code != 0:
            raise GitConflict(["update-ref", "--stdin"], result.exit_code, result.stderr)

    # -- trees on disk ---------------------------------------------------------------------
    def materialise(self, tree: str, destination: Path) -> None:
        """Write the files of `tree` into `destination` from the object store (a private
        index, so neither the user's index nor any worktree is touched)."""
        destination.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="imm-index-") as scratch:
            env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
            self.git.run(["read-tree", tree], env=env)
            prefix = str(destination).rstrip("/") + "/"
            self.git.run(["checkout-index", "-a", "-f", f"--prefix={prefix}"], env=env)

    # -- worktrees (lanes) ----------------------------------------------------------------
    def add_worktree(self, path: Path, commit: str) -> None:
        """A detached worktree at `commit`: lanes never touch the user's checkout or branch."""
        with self._worktrees_locked() as admin:
            _drop_unfinished_worktrees(admin)
            self.git.run(["worktree", "prune"])
            self.git.run(["worktree", "add", "--quiet", "--detach", "--force", str(path), commit])

    def remove_worktree(self, path: Path) -> None:
        with self._worktrees_locked():
            self.git.run(["worktree", "remove", "--force", str(path)], ok_codes=(0, 128))

    @contextlib.contextmanager
    def refs_locked(self) -> Iterator[None]:
        """Hold the repository's ref lock (all of imm's ref writers take it) and clear lock
        files that killed writers of ours left: any in imm's namespaces, and `packed-refs.lock`
        when it was made while a writer of ours that never finished held this lock.

        git locks `packed-refs` for every transaction that deletes a ref (integration deletes
        the lane's refs), so a writer killed in that moment leaves `packed-refs.lock`, and every
        later deletion fails as a lost race, for good. That file is shared with the user's own
        git: the lock file itself records since when a writer of ours is at work (cleared when
        it is done), and only a `packed-refs.lock` no older than that is taken for its debris."""
        common = self.common_directory()
        with self._flock("imm-refs.lock") as lock:
            for namespace in IMM_REF_NAMESPACES:
                _drop_stale_ref_locks(common / namespace)
            lock.seek(0)
            _drop_stale_packed_refs_lock(common, lock.read())
            _mark_writer(lock, f"{time.time():.3f}\n".encode())
            try:
                yield
            except GitConflict:
                _mark_writer(lock, b"")  # git ended on its own: its locks went with it
                raise
            # Done. Killed, or failed otherwise (a git killed on a timeout, Ctrl-C), the mark
            # stays, and the next writer looks for what was left.
            _mark_writer(lock, b"")

    @contextlib.contextmanager
    def _flock(self, name: str) -> Iterator[BinaryIO]:
        """An exclusive flock on `<common dir>/<name>`; yields the lock file, open. An flock
        dies with its process, so a writer killed with SIGKILL never leaves it held."""
        with open(self.common_directory() / name, "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield lock
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _worktrees_locked(self) -> Iterator[Path]:
        """Hold the repository's worktree lock; yields `<common dir>/worktrees`.

        `git worktree add/remove/prune` are not safe against each other: a remove or prune
        deletes `.git/worktrees` when it empties it while an add is creating its entry there
        ("could not create directory of .git/worktrees/work"), and an add reads every other
        entry, dying on one that another add has only half written. Lanes run in parallel, so
        every change to the worktree list goes through this lock."""
        with self._flock("imm-worktrees.lock"):
            yield self.common_directory() / "worktrees"

    def snapshot_worktree(self, worktree: Path) -> tuple[str, str]:
        """Stage everything in a worktree (its own index; ignored files stay out) and return
        (tree id, HEAD commit) — the lane's work as it stands."""
        runner = GitRunner(worktree)
        runner.run(["add", "-A"])
        tree = runner.output(["write-tree"]).strip()
        head = runner.output(["rev-parse", "HEAD"]).strip()
        return tree, head

    def changed_paths(self, start: str, end: str) -> list[str]:
        """Paths that differ between two tree-ishes."""
        listing = self.git.output(
            ["diff-tree", "-r", "-z", "--name-only", "--no-renames", start, end]
        )
        return sorted(path for path in listing.split("\0") if path)


_WORKTREE_ENTRY_FILES = ("gitdir", "commondir", "HEAD")


def _drop_unfinished_worktrees(admin: Path) -> None:
    """Remove worktree entries that a killed `git worktree add` left half made (a file of the
    entry missing or empty, or still locked as "initializing"). Called under the worktree
    lock, so no add of ours is in progress: whatever is unfinished was abandoned. git itself
    neither prunes such an entry (it is locked) nor survives reading it."""
    if not admin.is_dir():
        return
    for entry in admin.iterdir():
        if not entry.is_dir():
            continue
        locked = entry / "locked"
        unfinished = any(
            not (entry / name).is_file() or (entry / name).stat().st_size == 0
            for name in _WORKTREE_ENTRY_FILES
        ) or (locked.is_file() and locked.read_text(errors="replace").startswith("initializing"))
        if unfinished:
            shutil.rmtree(entry, ignore_errors=True)


def _mark_writer(lock: BinaryIO, mark: bytes) -> None:
    lock.seek(0)
    lock.truncate()
    lock.write(mark)
    lock.flush()


# How long a writer of ours may hold the ref lock at the most: a local ref transaction takes
# milliseconds. A `packed-refs.lock` made later than this after a killed writer began is not its.
WRITER_SECONDS = 60.0


def _drop_stale_packed_refs_lock(common: Path, mark: bytes) -> None:
    """`mark`: what the ref lock file held when taken; a time when a writer of ours that was
    killed began. A `packed-refs.lock` is that writer's debris only when it was made while that
    writer could have been at work (from its start to WRITER_SECONDS later) and no other git is
    at work in the repository (git closes the lock file as soon as it holds it, so the file
    itself does not say whether its git lives). Anything else belongs to someone else's git,
    and stays: the transaction then fails as a lost race, and the pass that gives up names the
    file (issue 28 #7)."""
    try:
        began = float(mark.decode().strip())
    except ValueError:
        return  # no writer of ours died at work
    packed = common / "packed-refs.lock"
    with contextlib.suppress(FileNotFoundError):
        made = packed.stat().st_mtime
        # mtimes are whole seconds on some file systems: a second's leeway
        if began - 1.0 <= made <= began + WRITER_SECONDS and not _git_at_work(common):
            packed.unlink()


def _git_at_work(common: Path) -> bool:
    """Whether a git that is not imm's (it lacks the mark every git imm runs carries) works
    in the repository: its folder is inside the repository's work tree or git directory,
    lanes' trees (under `<git dir>/imm`) aside. Processes of other users, which this one may
    not look into, are not asked: the user's git runs as the user."""
    root = common.parent if common.name == ".git" else common
    places = (str(root.resolve()), str(common.resolve()))
    ours = str((common / "imm").resolve())
    mark = f"\0{IMM_GIT_MARK}=1\0".encode()
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if (process / "comm").read_text().strip() != "git":
                continue
            folder = os.readlink(process / "cwd")
            environment = b"\0" + (process / "environ").read_bytes()
        except OSError:
            continue  # ended meanwhile, or another user's
        inside = any(folder == place or folder.startswith(place + "/") for place in places)
        in_a_lane = folder == ours or folder.startswith(ours + "/")
        if inside and not in_a_lane and mark not in environment:
            return True
    return False


def _drop_stale_ref_locks(directory: Path) -> None:
    """Remove `<ref>.lock` files under `directory` (called under the ref lock: no writer of
    ours is running, so each one was left by a writer that was killed)."""
    if not directory.is_dir():
        return
    for lock in directory.rglob("*.lock"):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


def _tree_entries(body: bytes, id_size: int) -> dict[str, tuple[str, str]]:
    """A raw tree object's entries: name -> (mode as git prints it, id). Modes are made
    canonical as git does when it reads a tree (an old `100664` is a `100644`)."""
    entries: dict[str, tuple[str, str]] = {}
    at = 0
    while at < len(body):
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries[name] = (
            _canonical_mode(int(body[at:space], 8)),
            body[nul + 1 : nul + 1 + id_size].hex(),
        )
        at = nul + 1 + id_size
    return entries


def _canonical_mode(mode: int) -> str:
    kind = mode & 0o170000
    if kind == 0o040000:
        return FOLDER_MODE
    if kind == 0o120000:
        return "120000"
    if kind == 0o160000:
        return "160000"
    return "100755" if mode & 0o100 else "100644"


def _tree_files(body: bytes, id_size: int) -> dict[str, str]:
    """A raw tree object's blob entries (`<mode> <name>\0<binary id>` each): name -> id."""
    files: dict[str, str] = {}
    at = 0
    while at < len(body):
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        mode = body[at:space]
        if mode in (b"100644", b"100755", b"120000"):
            name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
            files[name] = body[nul + 1 : nul + 1 + id_size].hex()
        at = nul + 1 + id_size
    return files
