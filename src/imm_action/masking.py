"""Secrets never appear in what imm writes (SPEC §8, issue 12).

Provider keys reach executors by design, and an executor or a descriptor may print them. Every
text imm writes from untrusted output — lane logs, outcome findings and reasons, check results,
comments and summaries — goes through one `Masker` built from the environment imm runs in: the
value of every variable whose *name* looks secret is replaced by `***`.

This module is pure (no environment read here): the composition root or the command hands it the
environment it was given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from imm_action import credentials

MASK = "***"

# A name that looks like it holds a secret: ANTHROPIC_API_KEY, GITHUB_TOKEN, DB_PASSWORD, ...
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|AUTH|COOKIE|SESSION|(^|_)KEY$|(^|_)PAT$",
    re.IGNORECASE,
)
# Shorter values are not masked: masking "1" or "true" would garble every log and hide nothing.
MIN_SECRET_LENGTH = 6


def looks_secret(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


@dataclass(frozen=True)
class Masker:
    """Replaces known secret values in text. Longest first, so a secret that contains another
    is masked whole."""

    values: tuple[str, ...] = ()

    def __call__(self, text: str) -> str:
        if not self.values or not text:
            return text
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def __bool__(self) -> bool:
        return bool(self.values)

    @property
    def longest(self) -> int:
        """Length of the longest secret: a stream masker keeps this much back between writes."""
        return max((len(value) for value in self.values), default=0)

    def including(self, values: Iterable[str]) -> Masker:
        return Masker(_ordered((*self.values, *values)))


def masker_for(environment: Mapping[str, str]) -> Masker:
    """A masker for the values of every secret-looking variable of `environment`, and of the
    token imm holds in memory (credentials.py)."""
    found = [value for name, value in environment.items() if looks_secret(name) and value]
    return Masker(_ordered([*found, *credentials.held_secrets()]))


def _ordered(values: Iterable[str]) -> tuple[str, ...]:
    kept = {value for value in values if len(value) >= MIN_SECRET_LENGTH}
    return tuple(sorted(kept, key=lambda value: (-len(value), value)))


NO_MASK = Masker()


class TextSink(Protocol):
    def write(self, text: str, /) -> object: ...


class MaskingWriter:
    """A sink for a stream of untrusted output, masked on the way through. It holds back the
    last `longest - 1` characters, so a secret split across two writes is still masked whole."""

    def __init__(self, sink: TextSink, masker: Masker) -> None:
        self._sink = sink
        self._masker = masker
        self._pending = ""

    def write(self, text: str) -> None:
        if not self._masker:
            self._sink.write(text)
            return
        self._pending = self._masker(self._pending + text)
        cut = len(self._pending) - (self._masker.longest - 1)
        if cut > 0:
            self._sink.write(self._pending[:cut])
            self._pending = self._pending[cut:]

    def close(self) -> None:
        if self._pending:
            self._sink.write(self._masker(self._pending))
            self._pending = ""
