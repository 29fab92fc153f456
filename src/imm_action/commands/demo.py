"""`imm demo [--dir P]`: build a demo repository and run a real batch on it, locally."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from imm_action.carriers.source import InitiativeSource
from imm_action.commands import run as run_command
from imm_action.console import CommandIO
from imm_action.demo.project import SLUG, create_demo_repository
from imm_action.errors import UsageError


@dataclass(frozen=True)
class DemoArgs:
    directory: Path | None
    environment: Mapping[str, str]
    initiatives: Callable[[Path], InitiativeSource]  # the demo repository's, once it exists


def run(args: DemoArgs, io: CommandIO) -> int:
    root = args.directory or Path(tempfile.mkdtemp(prefix="imm-demo-"))
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"--dir {root}: not empty; name a new or empty folder")
    create_demo_repository(root)
    io.warn(f"imm demo: created the demo repository at {root}")
    io.warn(f"imm demo: running `imm run {SLUG} --repo {root}` with the bundled executor")
    code = run_command.run(
        run_command.RunArgs(SLUG, root, None, None, None, False, args.environment),
        io,
        args.initiatives(root),
    )
    graph = subprocess.run(
        ["git", "log", "--graph", "--oneline", "--decorate", f"imm/{SLUG}"],
        cwd=root, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    io.say("")
    io.say(f"git log --graph imm/{SLUG}:")
    io.say(graph.rstrip())
    io.say("")
    io.say(f"The demo repository is at {root}. Try: imm status --repo {root} --format markdown")
    return code
