"""GitHub's own actions that imm's workflows and action use, pinned by commit (SHA) with the
release tag beside it in a comment, as GitHub's hardening guide advises: a tag can be moved, a
commit cannot. The SHAs are the tags' commits in the actions' own repositories (ADR 0043).

`imm init` writes these pins and, on a rerun, moves a step still on an older major (or on a pin
imm wrote before) to them; a pin the user chose is theirs and stays."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    sha: str
    tag: str  # the release the commit is, e.g. v7.0.1

    @property
    def major(self) -> int:
        return int(self.tag[1:].split(".")[0])


PINS: dict[str, Pin] = {
    "actions/checkout": Pin("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": Pin("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": Pin("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": Pin("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "actions/cache": Pin("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
}

# Pins earlier releases of imm wrote (none yet as SHAs: they wrote tags): a rerun of `imm init`
# moves these forward like an older major.
EARLIER_PINS: frozenset[str] = frozenset()

_TAG = re.compile(r"v(\d+)(\.\d+){0,2}")


def pinned(action: str) -> str:
    """`owner/name@<sha>` for a pinned action."""
    return f"{action}@{PINS[action].sha}"


def upgrade_of(uses: str) -> Pin | None:
    """The pin a step's `uses:` moves to on a rerun of `imm init`, or None to keep it: a known
    action on a tag of an older major, or on a pin imm wrote before. A newer tag, a branch, or
    a SHA imm never wrote is the user's choice."""
    action, _, ref = uses.partition("@")
    pin = PINS.get(action)
    if pin is None or ref == pin.sha:
        return None
    if ref in EARLIER_PINS:
        return pin
    tag = _TAG.fullmatch(ref)
    if tag is not None and int(tag.group(1)) < pin.major:
        return pin
    return None
