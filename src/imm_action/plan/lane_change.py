"""What a lane commit may change (SPEC §5.4; issue 12) — checked again at integration, because a
lane is untrusted and its own checks prove nothing.

Pure: it takes the change as (path, mode, link target) entries and answers with the refusal a
person reads, naming the paths, or None. In order: a path under `.git` (any segment), a gitlink
(a submodule commit the integrator could not check), a symlink leaving the repository or pointing
into `.git`, and a path outside the task's `scope_hint`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from imm_action.plan.glob import outside_scope
from imm_action.text import listed

GIT_PATH = "lane_git_path"
GITLINK = "lane_gitlink"
SYMLINK_OUT = "lane_symlink_outside"
OUTSIDE_SCOPE = "lane_outside_scope"
TOUCHES_PLAN = "lane_touches_plan"

LINK_MODE = "120000"
GITLINK_MODE = "160000"
GONE_MODE = "000000"


@dataclass(frozen=True)
class ChangedEntry:
    path: str
    mode: str  # the new mode ("000000" when the change removes the path)
    link_target: str | None = None  # for a symlink: what it points to


def lane_change_refusal(
    entries: Sequence[ChangedEntry],
    scope_hint: Sequence[str],
    plan_paths: Collection[str] = (),
) -> str | None:
    """Why these changes must not land, naming the paths; None when they may. `plan_paths`:
    the files what the batch is judged by comes from — its intents, its initiative, the
    config — which no lane may change, whatever its scope (ADR 0034)."""
    git_paths = [e.path for e in entries if ".git" in e.path.lower().split("/")]
    if git_paths:
        return f"{GIT_PATH}: {listed(sorted(git_paths))}"
    touched = [e.path for e in entries if e.path in plan_paths]
    if touched:
        return f"{TOUCHES_PLAN}: {listed(sorted(touched))}"
    gitlinks = [e.path for e in entries if e.mode == GITLINK_MODE]
    if gitlinks:
        return f"{GITLINK}: {listed(sorted(gitlinks))}"
    leaving = [e.path for e in entries if e.mode == LINK_MODE and not _stays_inside(e)]
    if leaving:
        return f"{SYMLINK_OUT}: {listed(sorted(leaving))}"
    outside = outside_scope(scope_hint, (e.path for e in entries))
    if outside:
        return f"{OUTSIDE_SCOPE}: {listed(outside)}"
    return None


def _stays_inside(entry: ChangedEntry) -> bool:
    """A link whose target, read from the link's folder, stays in the repository and out of
    `.git`."""
    target = entry.link_target
    if target is None or not target or target.startswith("/") or "\0" in target:
        return False
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), target))
    if resolved == ".." or resolved.startswith("../"):
        return False
    return ".git" not in resolved.lower().split("/")
