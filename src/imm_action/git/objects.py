"""The object reader: git's objects as imm reads them — commits, trees, blobs — through one
long-lived `git cat-file --batch`, and the types they are read into."""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from imm_action.git.errors import GitFatal
from imm_action.git.runner import GitRunner


@dataclass(frozen=True)
class Identity:
    name: str
    email: str


IMM_IDENTITY = Identity("imm-action", "imm-action@users.noreply.github.com")


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


def parse_person(value: str) -> tuple[str, str, str]:
    """`Name <email> 1700000000 +0000` -> (name, email, raw date)."""
    name, _, rest = value.partition(" <")
    email, _, date = rest.partition("> ")
    if not date:
        raise ValueError(value)
    return name, email, date


OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


ANCESTRY_LIMIT = 100_000


COMMIT_LIMIT = 20_000  # parsed commits kept (a few hundred bytes each)


FOLDER_LIMIT = 64  # folder listings kept, by their content


TREE_LIMIT = 4096  # parsed trees kept for diffs (a stack's candidates share most of theirs)


FOLDER_MODE = "040000"


GONE_MODE = "000000"


ChangeIdentity = Mapping[str, str]  # path -> "<mode> <blob>" of the new side ("000000 000…" = gone)


class ObjectReader:
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


def raw_tree_entries(body: bytes, id_size: int) -> dict[str, tuple[str, str]]:
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


def raw_tree_files(body: bytes, id_size: int) -> dict[str, str]:
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
