"""Scope overlap exactly as the reference decides it (`scopePrefix`/`scopesOverlap`).

An entry is reduced to the literal directory prefix before its first glob character; two entries
overlap when one prefix is a segment-prefix of the other. An entry we cannot reason about (empty,
absolute, backslashes, `.`/`..`) yields the empty prefix, which overlaps everything — and so does
an empty scope list. `ScopeIndex` answers the same question for many scopes at once with a trie.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

Prefix = tuple[str, ...]

# ECMAScript's String.prototype.trim() strips WhiteSpace and LineTerminator; Python's str.strip()
# strips a different set (e.g. it keeps U+FEFF and drops U+001C..U+001F), so spell it out.
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WILDCARD = re.compile(r"[*?\[\]{}!]")
UNIVERSAL: Prefix = ()


def js_trim(value: str) -> str:
    return value.strip(_JS_WHITESPACE)


_PLAIN = re.compile(r"[a-z0-9_][a-z0-9_./-]*")


def scope_prefix(entry: str) -> Prefix:
    """The literal directory segments an entry is confined to; `()` when it is unprovable."""
    value = entry.lower()
    if _PLAIN.fullmatch(value) and "/." not in value and "//" not in value:
        # The common case (a tidy relative path, no glob): just its segments. `/.` rules out
        # `.`/`..` segments and `//` empty ones, which the general path below handles.
        return tuple(value.split("/")) if not value.endswith("/") else tuple(value[:-1].split("/"))
    value = js_trim(value)
    while value.startswith("./"):
        value = value[2:]
    if not value or value.startswith("/") or "\\" in value:
        return UNIVERSAL
    wildcard = _WILDCARD.search(value)
    literal = value if wildcard is None else value[: value.rfind("/", 0, wildcard.start()) + 1]
    segments = tuple(segment for segment in literal.split("/") if segment)
    if any(segment in (".", "..") for segment in segments):
        return UNIVERSAL
    return segments


def scope_prefixes(scope: Sequence[str]) -> tuple[Prefix, ...]:
    """All prefixes of a scope list; an empty list is confined to nothing, so it is universal."""
    if not scope:
        return (UNIVERSAL,)
    return tuple(scope_prefix(entry) for entry in scope)


def prefixes_overlap(left: Prefix, right: Prefix) -> bool:
    shared = min(len(left), len(right))
    return left[:shared] == right[:shared]


def scopes_overlap(left: Sequence[str], right: Sequence[str]) -> bool:
    if not left or not right:
        return True
    right_prefixes = [scope_prefix(entry) for entry in right]
    return any(
        prefixes_overlap(scope_prefix(entry), other) for entry in left for other in right_prefixes
    )


class _Node:
    __slots__ = ("children", "owners", "weight")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.owners: list[int] = []
        self.weight = 0  # number of owner entries at this node and below


class ScopeIndex:
    """A trie of prefixes: which registered owners overlap a scope, without pairwise comparison.

    Owners overlapping prefix `p` are those with an entry on the path from the root to `p`
    (their prefix is a segment-prefix of `p`) and those in the subtree under `p` (`p` is a
    segment-prefix of theirs). The root holds universal entries, so they overlap everything.
    """

    def __init__(self) -> None:
        self._root = _Node()

    def add(self, owner: int, prefixes: Iterable[Prefix]) -> None:
        for prefix in prefixes:
            node = self._root
            node.weight += 1
            for segment in prefix:
                child = node.children.get(segment)
                if child is None:
                    child = node.children[segment] = _Node()
                node = child
                node.weight += 1
            node.owners.append(owner)

    def overlaps_any(self, prefixes: Iterable[Prefix]) -> bool:
        for prefix in prefixes:
            node = self._root
            for segment in prefix:
                if node.owners:
                    return True
                below = node.children.get(segment)
                if below is None:
                    break
                node = below
            else:  # the whole prefix is in the trie: anything at or under it overlaps
                if node.weight:
                    return True
        return False

    def overlapping(self, prefixes: Iterable[Prefix]) -> set[int]:
        found: set[int] = set()
        for prefix in prefixes:
            node = self._root
            for segment in prefix:
                if node.owners:
                    found.update(node.owners)
                below = node.children.get(segment)
                if below is None:
                    break
                node = below
            else:
                _collect_subtree(node, found)
        return found


def _collect_subtree(node: _Node, found: set[int]) -> None:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.owners:
            found.update(current.owners)
        stack.extend(current.children.values())
