"""The streams a command writes to; the CLI passes the real ones, tests pass buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class CommandIO:
    out: TextIO
    err: TextIO

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        print(text, file=self.err)
