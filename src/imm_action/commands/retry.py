"""`imm retry <slug> <task_id>`: a parked child and the dependents it skipped go back to pending."""

from __future__ import annotations

from dataclasses import dataclass

from imm_action.batches.decisions import DecisionArgs, apply_decision, retry_decision
from imm_action.ports import Ports


@dataclass(frozen=True)
class RetryArgs(DecisionArgs):
    task_id: str


def run(args: RetryArgs, ports: Ports) -> int:
    return apply_decision(
        args, retry_decision(args.task_id), ports.io, ports.initiatives, retry=args.task_id
    )
