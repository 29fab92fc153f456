"""`imm reconcile <slug>`: one reconcile pass (GitHub plan/integrate jobs, or by hand)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imm_action.commands.batch import open_batch_repo, pass_ports, pass_request
from imm_action.commands.io import CommandIO
from imm_action.commands.status import exit_code_for, print_report
from imm_action.integrate.reconcile import reconcile


@dataclass(frozen=True)
class ReconcileArgs:
    slug: str
    repo: Path
    batch_id: str | None
    admit: bool
    remote: str | None
    format: str
    path_env: str


def run(args: ReconcileArgs, io: CommandIO) -> int:
    batch_repo = open_batch_repo(args.repo, args.remote)
    request = pass_request(batch_repo, args.slug, batch_id=args.batch_id, admit=args.admit)
    ports = pass_ports(batch_repo, lambda line: io.warn(f"imm: {line}"), path_env=args.path_env)
    result = reconcile(request, ports)
    if result.admitted:
        io.warn(f"imm: admitted {', '.join(result.admitted)}")
    assert result.stored.report is not None
    print_report(result.stored.report, result.stored.state, args.format, io)
    return exit_code_for(result.stored.state.batch_state)
