"""Untrusted text in Markdown, made inert (issue 62 #5): paths a lane chose, reasons that quote
them, check output, task titles. GitHub renders the status comment, the pull request body, the
job summary and the check run's summary as Markdown, then links `@mentions`, `#123`
references (a closing keyword before one closes that issue when the pull request merges) and
bare URLs in its text. So a lane's file named `@octocat fixes #1 <img src=x> **APPROVED**
<!--` would mention a user, close an issue, load an image and hide the rest of the report.

`inert` keeps the code spans a text already holds (imm writes commands as `` `cmd` ``: inert
on GitHub, which links nothing inside code), and in the rest escapes what Markdown or HTML
would act on and puts each token GitHub would link into a code span of its own. Pure, and
CommonMark's own rule for code spans, so what is code here is code to the renderer."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

# a run of backticks, which opens a code span only where a run of the same length closes it
_BACKTICKS = re.compile(r"`+")
# what GitHub links in text: mentions (`@user`, `@org/team`), references (`#12`, `GH-12`,
# `owner/repo#12`, a commit-like hex run is left: it links only to this repository's own),
# and URLs it autolinks
_LINKED = re.compile(
    r"(?:[\w.-]+/[\w.-]+)?#\d+|\bGH-\d+|@[\w-]+(?:/[\w-]+)?|\b(?:https?|ftp)://\S+|\bwww\.\S+",
    re.IGNORECASE,
)
# Markdown's inline punctuation (emphasis, links, images, strikethrough, escapes)
_PUNCTUATION = re.compile(r"([\\*\[\]!~])")
# an underscore that could open or close emphasis: not between two word characters
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def inert(text: str) -> str:
    """`text` on one line as Markdown that renders it as it is, with nothing live."""
    line = " ".join(text.split())
    parts: list[str] = []
    at = 0
    while at < len(line):
        opening = _BACKTICKS.search(line, at)
        if opening is None:
            parts.append(_plain(line[at:]))
            break
        closing = _closing(line, opening)
        if closing is None:  # no run of its length follows: literal backticks
            parts.append(_plain(line[at : opening.end()]))
            at = opening.end()
            continue
        parts.append(_plain(line[at : opening.start()]))
        parts.append(line[opening.start() : closing.end()])  # a code span: inert already
        at = closing.end()
    return "".join(parts)


def inert_cell(text: str | None) -> str:
    """`inert`, for a table cell: a pipe is escaped even in a code span (GFM's tables split
    rows before anything else); nothing is an em dash."""
    if not text:
        return "—"
    return inert(text).replace("|", "\\|")


def inert_html(text: str) -> str:
    """`text` inside HTML (a `<summary>`, where Markdown is not read): escaped, and each token
    GitHub would link in `<code>`, inside which it links nothing."""
    return _around_linked(text, html.escape, lambda token: f"<code>{html.escape(token)}</code>")


def code_span(text: str) -> str:
    """`text` as one inline code span, whatever backticks it holds (CommonMark: a fence of
    more backticks than any run inside, spaced where the text starts or ends with one)."""
    fence = "`" * (longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def longest_backticks(text: str) -> int:
    """The longest run of backticks in `text` (0 without one)."""
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _closing(line: str, opening: re.Match[str]) -> re.Match[str] | None:
    """The run of backticks that closes the code span `opening` begins: the next of exactly
    its length."""
    for run in _BACKTICKS.finditer(line, opening.end()):
        if len(run.group()) == len(opening.group()):
            return run
    return None


def _plain(text: str) -> str:
    """Text outside code spans: each token GitHub would link in a code span of its own, the
    rest escaped (HTML's characters as entities, Markdown's punctuation and backticks with a
    backslash)."""
    return _around_linked(text, _escaped, code_span)


def _around_linked(text: str, escape: Callable[[str], str], wrap: Callable[[str], str]) -> str:
    """`text` with each token GitHub would link wrapped by `wrap`, the rest by `escape`."""
    parts: list[str] = []
    at = 0
    for token in _LINKED.finditer(text):
        parts += [escape(text[at : token.start()]), wrap(token.group())]
        at = token.end()
    parts.append(escape(text[at:]))
    return "".join(parts)


def _escaped(text: str) -> str:
    text = html.escape(text, quote=False)
    text = _PUNCTUATION.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return text.replace("`", "\\`")
