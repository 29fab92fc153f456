"""Repo-relative path rules shared by intents and descriptors."""

from __future__ import annotations

import re
import unicodedata

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def relative_path_problem(value: str, *, allow_dot: bool = False) -> str | None:
    """Why `value` is not a safe repo-relative path, or None when it is.

    Paths from intents and descriptors are untrusted (SPEC §8): they must never name a place
    outside the repository, whatever the platform.
    """
    if value == "":
        return "must not be empty"
    if value == "." and allow_dot:
        return None
    if "\x00" in value:
        return "must not contain NUL"
    if _CONTROL.search(value):
        return "must not contain control characters"
    if "\\" in value:
        return "must use '/' separators, not backslashes"
    if value.startswith("/"):
        return "must be relative to the repository root, not absolute"
    if _DRIVE.match(value):
        return "must not start with a drive prefix"
    if not unicodedata.is_normalized("NFC", value):
        return "must be NFC-normalised Unicode"
    for segment in value.split("/"):
        if segment == "":
            return "must not contain an empty segment (no '//' and no trailing '/')"
        if segment in (".", ".."):
            return f"must not contain a '{segment}' segment"
    return None
