"""What a command works through: `commands/<name>.py: run(args, ports) -> int` (SPEC §3).

`args` is what the command line said; `ports` are the streams and the adapters that the
composition root (`cli.py`) built from the environment — tests build their own. Most commands
need the streams and the initiative source (`Ports`); a command that needs more declares its own
ports next to its `run` (e.g. `ReconcilePorts` with GitHub reporting), one that needs only the
streams takes a `CommandIO`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imm_action.carriers.source import InitiativeSource
    from imm_action.console import CommandIO


@dataclass(frozen=True)
class Ports:
    io: CommandIO
    initiatives: InitiativeSource
