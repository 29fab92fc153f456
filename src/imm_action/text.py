"""Small words for messages (pure; imported from every layer)."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 task`, `2 tasks`, `0 tasks`; `many` for irregular words (`child`, `children`)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
