"""Which paths a scope covers (SPEC §4.2 globs): `*` one segment's characters, `?` one
character, `**` any number of whole segments; a literal entry covers itself and everything
below it. Used to refuse lane changes outside a task's scope (`dirty_outside_scope`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

_GLOB = re.compile(r"[*?]")


@functools.lru_cache(maxsize=4096)
def _pattern(entry: str) -> re.Pattern[str]:
    parts = entry.split("/")
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".+" if last else "(?:[^/]+/)*"
            continue
        regex += "".join(
            "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char) for char in part
        )
        regex += "" if last else "/"
    return re.compile(regex)


def entry_covers(entry: str, path: str) -> bool:
    if _GLOB.search(entry) is None:
        return path == entry or path.startswith(entry + "/")
    return _pattern(entry).fullmatch(path) is not None


def scope_covers(scope: Sequence[str], path: str) -> bool:
    return any(entry_covers(entry, path) for entry in scope)


def outside_scope(scope: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The paths no entry of `scope` covers, sorted."""
    return sorted(path for path in paths if not scope_covers(scope, path))
