"""`imm cancel <slug>`: the batch becomes cancelled; a running `imm run` stops its lanes."""

from __future__ import annotations

from imm_action.batches.decisions import DecisionArgs, apply_decision
from imm_action.integrate import transitions
from imm_action.ports import Ports


def run(args: DecisionArgs, ports: Ports) -> int:
    return apply_decision(args, transitions.cancel, ports.io, ports.initiatives)
