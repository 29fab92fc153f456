"""The streams a command writes to; the CLI passes the real ones, tests pass buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class CommandIO:
    out: TextIO
    err: TextIO
    # How the person invoked imm (`imm`, `/venv/bin/imm`, `python -m imm_action`): commands we
    # print for them to paste start with it, so they run as printed.
    program: str = "imm"

    def say(self, text: str) -> None:
        print(text, file=self.out)

    def warn(self, text: str) -> None:
        print(text, file=self.err)
