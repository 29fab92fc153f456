"""What a lane commit may change (SPEC §5.4; issue 12) — checked again at integration, because a
lane is untrusted and its own checks prove nothing.

Pure: it takes the change as (path, mode, link target) entries and answers with the refusal a
person reads, naming the paths, or None. In order: a path under `.git` (any segment), a gitlink
(a submodule commit the integrator could not check), a symlink leaving the repository or pointing
into `.git`, and a path outside the task's `scope_hint`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from imm_action.plan.glob import outside_scope
from imm_action.text import listed

GIT_PATH = "lane_git_path"
GITLINK = "lane_gitlink"
SYMLINK_OUT = "lane_symlink_outside"
OUTSIDE_SCOPE = "lane_outside_scope"
TOUCHES_PLAN = "lane_touches_plan"
TOUCHES_CHECK = "lane_touches_check"

LINK_MODE = "120000"
GITLINK_MODE = "160000"
GONE_MODE = "000000"


@dataclass(frozen=True)
class ChangedEntry:
    path: str
    mode: str  # the new mode ("000000" when the change removes the path)
    link_target: str | None = None  # for a symlink: what it points to
    added: bool = False  # the path held no file before the change (a new file)


@dataclass(frozen=True)
class NamedPath:
    """A path the plan's checks name: the tasks whose checks do, and the tasks that may create,
    change or remove it — each owner and the tasks ordered before it, of every owner (issue
    58: ownership follows the plan's order)."""

    owners: frozenset[str]
    writers: frozenset[str]


def touched_check(
    entry: ChangedEntry, named: Mapping[str, NamedPath], task_id: str | None
) -> frozenset[str]:
    """The owners of a named path this entry may not touch: it is the named path itself, or a
    file below a named folder that the change does not add — a file the owner's landed check
    ran (issue 42 #2) — and the lane's task is not ordered before each owner. A new file below
    a named folder is the test ledger's to judge, not a change to what the check names."""
    found: set[str] = set()
    at = entry.path
    while at:
        known = named.get(at)
        touched = at == entry.path or not entry.added
        if known is not None and task_id not in known.writers and touched:
            found.update(known.owners)
        at = at.rpartition("/")[0]
    return frozenset(found)


def lane_change_refusal(
    entries: Sequence[ChangedEntry],
    scope_hint: Sequence[str],
    plan_paths: Collection[str] = (),
    tree_links: Mapping[str, str] | None = None,
    *,
    check_files: Mapping[str, NamedPath] | None = None,
    task_id: str | None = None,
) -> str | None:
    """Why these changes must not land, naming the paths; None when they may. `plan_paths`:
    the files what the batch is judged by comes from — its intents, its initiative, the
    config — which no lane may change, whatever its scope (ADR 0034). `tree_links`: every
    link of the tree the change makes (path -> target), when the change adds, changes or
    removes a link: then every link is resolved again through the others, since one new link
    (`out/r -> ..`) changes where an old one leads. `check_files`: the repository files the
    plan's checks run or name (path -> the tasks whose checks do), which only those tasks may
    change, nor anything below them (issue 28: a lane rewriting the script a sibling's check
    runs; issue 42: a test its owner wrote in this batch, a file below a folder a check names)."""
    git_paths = [e.path for e in entries if ".git" in e.path.lower().split("/")]
    if git_paths:
        return f"{GIT_PATH}: {listed(sorted(git_paths))}"
    touched = [e.path for e in entries if e.path in plan_paths]
    if touched:
        return f"{TOUCHES_PLAN}: {listed(sorted(touched))}"
    owned = check_files or {}
    foreign = sorted(
        f"{e.path} ({', '.join(sorted(owners))})"
        for e in entries
        if (owners := touched_check(e, owned, task_id))
    )
    if foreign:
        return f"{TOUCHES_CHECK}: {listed(foreign)}"
    gitlinks = [e.path for e in entries if e.mode == GITLINK_MODE]
    if gitlinks:
        return f"{GITLINK}: {listed(sorted(gitlinks))}"
    links = dict(tree_links) if tree_links is not None else {}
    links.update((e.path, e.link_target or "") for e in entries if e.mode == LINK_MODE)
    leaving = [path for path in links if resolve_link(path, links) is None]
    if leaving:
        return f"{SYMLINK_OUT}: {listed(sorted(leaving))}"
    outside = outside_scope(scope_hint, (e.path for e in entries))
    if outside:
        return f"{OUTSIDE_SCOPE}: {listed(outside)}"
    return None


MAX_LINK_HOPS = 40  # as the kernel's limit on links followed in one lookup (ELOOP)


def resolve_link(path: str, links: Mapping[str, str]) -> str | None:
    """Where the link at `path` leads, followed physically — segment by segment through the
    other links of the tree, as the kernel would in a checkout — or None when it leaves the
    repository, meets `.git`, or cannot be resolved (a loop, too many hops, an absolute or
    empty target, a NUL). A path that does not exist is followed as a folder would be."""
    hops = 0

    pending = _segments(links.get(path)) if path in links else None
    if pending is None:
        return None
    resolved = path.split("/")[:-1]  # the physical path so far: the link's folder
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return None  # above the repository root
            resolved.pop()
            continue
        if part.lower() == ".git":
            return None
        here = "/".join([*resolved, part])
        if here in links:
            hops += 1
            target = _segments(links[here])
            if target is None or hops > MAX_LINK_HOPS:
                return None
            pending = target + pending  # the link's target, read from the link's folder
            continue
        resolved.append(part)
    return "/".join(resolved)


def _segments(target: str | None) -> list[str] | None:
    if not target or target.startswith("/") or "\0" in target:
        return None
    return target.split("/")
