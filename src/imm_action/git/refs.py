"""Where batch refs live — this repository, or a remote reached by fetch and atomic push — and
the one way they move: a compare-and-swap of several refs at once (SPEC §5.5)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from imm_action.git.errors import GitConflict, GitPushRefused
from imm_action.git.repo import GitRepo, RefUpdate


class RefStore(Protocol):
    """The refs a pass reads and moves. Objects are always made in `repo`.

    `compare_and_swap` moves every ref of one transaction or none; it raises `GitConflict` when
    a ref is no longer at its expected old value (another writer was first)."""

    repo: GitRepo

    def refresh(self) -> None: ...

    def read(self, names: Iterable[str]) -> dict[str, str | None]: ...

    def list(self, prefix: str) -> dict[str, str]: ...

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None: ...


class LocalRefStore:
    """Refs of the repository itself; a CAS is one `update-ref --stdin` transaction."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo

    def refresh(self) -> None:
        return None

    def read(self, names: Iterable[str]) -> dict[str, str | None]:
        return self.repo.read_refs(names)

    def list(self, prefix: str) -> dict[str, str]:
        return self.repo.list_refs(prefix)

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        self.repo.compare_and_swap(updates)


MIRROR = "refs/imm-mirror/"


class RemoteRefStore:
    """Refs of a remote (e.g. GitHub). `refresh` fetches them into a private mirror namespace
    with their objects; a CAS is one `git push --atomic` with a lease on every ref it moves."""

    def __init__(self, repo: GitRepo, remote: str = "origin") -> None:
        self.repo = repo
        self.remote = remote

    def refresh(self) -> None:
        # Patterns, not names: a branch that does not exist yet must not fail the fetch. The
        # fetch writes the mirror's refs, so it holds the ref lock like every writer of ours.
        with self.repo.refs_locked():
            self.repo.git.run(
                [
                    "fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head",
                    self.remote,
                    f"+refs/heads/imm/*:{MIRROR}refs/heads/imm/*",
                    # lane branches too: a lease on one must see it when it exists (an earlier
                    # attempt's), and integration deletes them
                    f"+refs/heads/imm-lane/*:{MIRROR}refs/heads/imm-lane/*",
                    f"+refs/imm/*:{MIRROR}refs/imm/*",
                ]
            )  # fmt: skip

    def fetch_commit(self, oid: str) -> None:
        """One commit of the remote's history (and its tree), where a shallow clone lacks it:
        the plan's commit, in a lane job. A commit the remote does not have fetches nothing."""
        self.repo.git.run(
            ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--depth=1",
             self.remote, oid],
            ok_codes=(0, 1, 128),
        )  # fmt: skip

    def read(self, names: Iterable[str]) -> dict[str, str | None]:
        wanted = list(names)
        mirrored = self.repo.read_refs(MIRROR + name for name in wanted)
        return {name: mirrored[MIRROR + name] for name in wanted}

    def list(self, prefix: str) -> dict[str, str]:
        return {
            name.removeprefix(MIRROR): oid
            for name, oid in self.repo.list_refs(MIRROR + prefix).items()
        }

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        args = ["push", "--atomic", "--porcelain", "--quiet", self.remote]
        for update in updates:
            args.append(f"--force-with-lease={update.ref}:{update.old or ''}")
        for update in updates:
            args.append(f"{update.new}:{update.ref}" if update.new else f":{update.ref}")
        result = self.repo.git.run(args, ok_codes=(0, 1))
        if result.exit_code != 0:
            refused = refused_by_the_remote(result.stdout)
            if refused:
                raise GitPushRefused(["push", "--atomic"], result.exit_code, result.stderr, refused)
            raise GitConflict(["push", "--atomic"], result.exit_code, result.stdout + result.stderr)
        # Our mirror now matches what we pushed; the next refresh confirms it.
        self.repo.compare_and_swap(
            [RefUpdate(MIRROR + u.ref, u.new, self.repo.read_refs([MIRROR + u.ref])[MIRROR + u.ref])
             for u in updates]
        )  # fmt: skip


# What the receiving side says when a ref it was asked to move changed under the push (a lost
# race, seen by the remote) or when another ref of the same atomic push failed.
_RACE_REASONS = ("atomic", "failed to update ref", "cannot lock ref", "stale info", "fetch first")


def refused_by_the_remote(porcelain: str) -> dict[str, str]:
    """The refs the remote refused for a reason of its own (`! <src>:<dst> [remote rejected]
    (<reason>)` in `git push --porcelain`), by ref, with the remote's reason."""
    refused: dict[str, str] = {}
    for line in porcelain.splitlines():
        flag, _, rest = line.partition("\t")
        if flag != "!" or "[remote rejected]" not in rest:
            continue
        spec, _, summary = rest.partition("\t")
        reason = summary.partition("(")[2].rstrip(")").strip()
        if not any(word in reason for word in _RACE_REASONS):
            refused[spec.rpartition(":")[2]] = reason or "refused"
    return refused
