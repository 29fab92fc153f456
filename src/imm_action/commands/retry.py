"""`imm retry <slug> <task_id>`: a parked child and the dependents it skipped go back to pending."""

from __future__ import annotations

from imm_action.batches.decisions import DecisionArgs, apply_decision, retry_decision
from imm_action.carriers.source import InitiativeSource
from imm_action.console import CommandIO


def run(args: DecisionArgs, task_id: str, io: CommandIO, initiatives: InitiativeSource) -> int:
    return apply_decision(args, retry_decision(task_id), io, initiatives)
