"""`imm demo [--dir P]`: build a demo repository and run a real batch on it, locally."""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from imm_action.batches.repo import open_batch_repo
from imm_action.carriers.source import InitiativeSource
from imm_action.commands import run as run_command
from imm_action.console import CommandIO
from imm_action.demo.project import SLUG, create_demo_repository
from imm_action.errors import UsageError
from imm_action.integrate.store import StateStore
from imm_action.lanes.outcome import read_outcome
from imm_action.model.refs import lane_outcome_ref
from imm_action.ports import Ports
from imm_action.render.failures import failure_text


@dataclass(frozen=True)
class DemoArgs:
    directory: Path | None
    environment: Mapping[str, str]


@dataclass(frozen=True)
class DemoPorts:
    io: CommandIO
    initiatives_of: Callable[[Path], InitiativeSource]  # the demo repository's, once it exists


def run(args: DemoArgs, ports: DemoPorts) -> int:
    io = ports.io
    root = args.directory or Path(tempfile.mkdtemp(prefix="imm-demo-"))
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"--dir {root}: not empty; name a new or empty folder")
    create_demo_repository(root)
    io.warn(f"imm demo: created the demo repository at {root}")
    run_line = f"{io.program} run {SLUG} --repo {shlex.quote(str(root))}"
    io.warn(f"imm demo: running `{run_line}` with the bundled executor")
    initiatives = ports.initiatives_of(root)
    code = run_command.run(
        run_command.RunArgs(SLUG, root, None, None, None, False, args.environment),
        Ports(io, initiatives),
    )
    _show_the_qa_loop(root, io, initiatives)
    graph = subprocess.run(
        ["git", "log", "--graph", "--oneline", "--decorate", f"imm/{SLUG}"],
        cwd=root, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    io.say("")
    io.say(f"git log --graph imm/{SLUG}:")
    io.say(graph.rstrip())
    io.say("")
    io.say(f"The demo repository is at {root}. Look around (each line runs as printed):")
    for line in closing_commands(io.program, root):
        io.say(f"  {line}")
    return code


def closing_commands(program: str, root: Path) -> list[str]:
    where = shlex.quote(str(root))
    return [
        f"{program} status {SLUG} --repo {where}",
        f"{program} status {SLUG} --repo {where} --format markdown",
        f"git -C {where} log --graph --oneline imm/{SLUG}",
    ]


def _show_the_qa_loop(root: Path, io: CommandIO, initiatives: InitiativeSource) -> None:
    """What a task's first attempt failed, and that the executor fixed it with those findings."""
    batch_repo = open_batch_repo(root, None, initiatives)
    store = StateStore(batch_repo.refs)
    stored = store.batches_of(SLUG)[-1]
    landed = store.landed_outcomes(stored.state.batch_id)  # their refs go when they land
    for child in stored.state.children:
        if not child.qa_failures:
            continue
        ref = lane_outcome_ref(stored.state.batch_id, child.task_id)
        commit = batch_repo.refs.read([ref])[ref] or landed.get(child.task_id)
        outcome = read_outcome(batch_repo.repo, commit) if commit else None
        if outcome is None or not outcome.failures:
            continue
        tries = child.qa_failures + 1
        io.say("")
        io.say(
            f"The QA loop: {child.task_id} failed its check on attempt {child.qa_failures}; "
            f"its executor got these findings and passed on attempt {tries}:"
        )
        for failure in outcome.failures:
            io.say(failure_text(failure, "  "))
