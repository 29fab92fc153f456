"""`imm cancel <slug>`: the batch becomes cancelled; a running `imm run` stops its lanes."""

from __future__ import annotations

from imm_action.batches.decisions import DecisionArgs, apply_decision
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO
from imm_action.integrate import transitions


def run(args: DecisionArgs, io: CommandIO, initiatives: InitiativeSource) -> int:
    return apply_decision(args, transitions.cancel, io, initiatives)
