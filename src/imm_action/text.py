"""Small words for messages (pure; imported from every layer)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 task`, `2 tasks`, `0 tasks`; `many` for irregular words (`child`, `children`)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


# -- untrusted text: what lanes, executors and checks print ----------------------------------
# Executor and check output, outcome reasons, author names: untrusted, and shown on terminals,
# in comments and summaries, stored in refs. One function cleans it and one reader bounds it,
# and every path through which such text flows calls them (issue 21, threat model row 33).
LINE_BYTES = 4096  # a kept line of output; the rest of a longer line is cut
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clear screen
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[@-_]"  # other two-character escapes
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# bidirectional controls and invisible characters: "Trojan Source" text reads one way and is
# another in a terminal or a pull request comment (issue 43 #7); shown as `<U+202E>`
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def clean_text(text: str, *, drop_invisible: bool = False) -> str:
    """`text` without terminal escape sequences and control characters (newline and tab stay),
    its bidirectional controls and invisible characters written out as `<U+XXXX>` — or dropped
    (`drop_invisible`: a name or an address, where the written-out form would be taken as
    part of it)."""
    if text.isprintable():
        return text
    plain = _CONTROLS.sub("", _ESCAPES.sub("", text))
    if drop_invisible:
        return _INVISIBLE.sub("", plain)
    return _INVISIBLE.sub(lambda found: f"<U+{ord(found.group()):04X}>", plain)


def cut_note(dropped: int) -> str:
    return f" [… {dropped} bytes cut]"


def split_lines(chunk: bytes, take: Callable[[bytes], None], end: Callable[[], None]) -> None:
    """A chunk of a byte stream cut at its newlines: `take` gets each piece of the line being
    read, `end` is called where a line ends (the newline itself goes to neither)."""
    start = 0
    while start < len(chunk):
        newline = chunk.find(b"\n", start)
        take(chunk[start : len(chunk) if newline < 0 else newline])
        if newline < 0:
            return
        end()
        start = newline + 1


class LineReader:
    """Splits a byte stream fed in chunks into clean lines of at most LINE_BYTES bytes each
    (plus a note of what was cut), never holding more than one such line: a 200 MB line costs
    4 KiB here."""

    def __init__(self, line_bytes: int = LINE_BYTES) -> None:
        self.line_bytes = line_bytes
        self._line = bytearray()
        self._dropped = 0

    def feed(self, chunk: bytes) -> list[str]:
        lines: list[str] = []
        split_lines(chunk, self._take, lambda: lines.append(self._emit()))
        return lines

    def finish(self) -> list[str]:
        return [self._emit()] if self._line or self._dropped else []

    def _take(self, part: bytes) -> None:
        room = self.line_bytes - len(self._line)
        self._line += part[: max(room, 0)]
        self._dropped += max(len(part) - room, 0)

    def _emit(self) -> str:
        text = clean_text(bytes(self._line).decode("utf-8", "replace"))
        if self._dropped:
            text += cut_note(self._dropped)
        self._line.clear()
        self._dropped = 0
        return text


def last_bytes(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` UTF-8 bytes (whole characters)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[-limit:].decode("utf-8", "ignore")


def first_bytes(text: str, limit: int) -> str:
    """The start of `text` in at most `limit` UTF-8 bytes (whole characters), ending with `…`
    when cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(limit - 3, 0)].decode("utf-8", "ignore") + "…"


def listed(items: Sequence[str], most: int = 20, budget: int = 1000) -> str:
    """`a, b, c` — or the first of them and `… and N more`, so that a lane changing 10^5
    paths cannot make a reason (stored in the batch state, shown in comments) as long."""
    shown: list[str] = []
    used = 0
    for item in items:
        if len(shown) == most or used + len(item) > budget:
            break
        shown.append(item)
        used += len(item) + 2
    rest = len(items) - len(shown)
    return ", ".join(shown) + (f" … and {rest} more" if rest else "")


def bounded(items: Sequence[str], most: int) -> list[str]:
    """At most `most` items: the first `most - 1` and `… and N more` when there are more, so
    a list counting untrusted work (10,000 files a check changed) never outgrows its model."""
    if len(items) <= most:
        return list(items)
    return [*items[: most - 1], f"… and {len(items) - most + 1} more"]
