"""A line-by-line Python transliteration of the reference's scheduling functions
(`scopePrefix`, `prefixOverlaps`, `scopesOverlap`, `startableChildren`, `projectParallelGroups`
in ../shared/reference/). It is the test oracle: slow and literal on purpose."""

from __future__ import annotations

import re
from typing import Any

_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
WILDCARD = re.compile(r"[*?\[\]{}!]")
IN_FLIGHT = {"lane_admitted", "enrolled", "settled", "lane_committed"}
DONE = {"committed", "integrated", "released"}


def scope_prefix(entry: Any) -> list[str]:
    if not isinstance(entry, str):
        return []
    value = entry.strip(_JS_WS).lower()
    while value.startswith("./"):
        value = value[2:]
    if not value or value.startswith("/") or "\\" in value:
        return []
    match = WILDCARD.search(value)
    wildcard = -1 if match is None else match.start()
    if wildcard == -1:
        literal = value
    else:
        # JS lastIndexOf("/", wildcard): last "/" at an index <= wildcard
        last = value.rfind("/", 0, wildcard + 1)
        literal = value[: last + 1]
    segments = [segment for segment in literal.split("/") if len(segment) > 0]
    if any(segment in (".", "..") for segment in segments):
        return []
    return segments


def prefix_overlaps(left: list[str], right: list[str]) -> bool:
    if not left or not right:
        return True
    shared = min(len(left), len(right))
    return all(left[index] == right[index] for index in range(shared))


def scopes_overlap(left: list[str], right: list[str]) -> bool:
    if not left or not right:
        return True
    right_prefixes = [scope_prefix(entry) for entry in right]
    return any(
        any(prefix_overlaps(scope_prefix(entry), other) for other in right_prefixes)
        for entry in left
    )


def startable_children(children: list[dict[str, Any]], max_parallel: int) -> list[str]:
    done = {child["task_id"] for child in children if child["state"] in DONE}
    occupied = [child for child in children if child["state"] in IN_FLIGHT]
    startable = []
    for child in children:
        if len(occupied) >= max_parallel:
            break
        if child["state"] != "pending":
            continue
        if not all(need in done for need in child["blocked_by"]):
            continue
        if any(scopes_overlap(child["scope_hint"], other["scope_hint"]) for other in occupied):
            continue
        startable.append(child["task_id"])
        occupied.append(child)
    return startable


def project_parallel_groups(children: list[dict[str, Any]]) -> dict[str, Any]:
    remaining = list(children)
    placed: set[str] = set()
    groups = []
    conflicts: dict[str, set[str]] = {}
    while remaining:
        ready = [c for c in remaining if all(need in placed for need in c["blocked_by"])]
        if not ready:
            raise ValueError("Initiative Task dependencies must form an acyclic graph")
        wave: list[dict[str, Any]] = []
        for child in ready:
            overlapped = [m for m in wave if scopes_overlap(child["scope_hint"], m["scope_hint"])]
            if overlapped:
                known = conflicts.setdefault(child["task_id"], set())
                known.update(member["task_id"] for member in overlapped)
                continue
            wave.append(child)
        groups.append([child["task_id"] for child in wave])
        for child in wave:
            placed.add(child["task_id"])
            remaining.remove(child)
    scope_conflicts = [
        {"task_id": c["task_id"], "overlaps_with": sorted(conflicts[c["task_id"]])}
        for c in children
        if c["task_id"] in conflicts
    ]
    return {"parallel_groups": groups, "scope_conflicts": scope_conflicts}
