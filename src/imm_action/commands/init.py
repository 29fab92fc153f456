"""`imm init [--repo P] [--action REF] [--check]`: write `.github/imm.yml` and the workflows, or
bring imm's parts of them up to date (keeping everything else), printing what changed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK
from imm_action.model.config import CONFIG_PATH
from imm_action.scaffold.files import changes_for, default_action
from imm_action.workspace import locate_repo


@dataclass(frozen=True)
class InitArgs:
    repo: Path
    action: str | None  # what the workflows' steps `uses:` to run imm; None = the default
    check: bool  # only tell whether an update is due (exit 1 when it is)


def run(args: InitArgs, io: CommandIO) -> int:
    root = locate_repo(args.repo)[1]
    action = args.action or default_action(root)
    changes = changes_for(root, action, pin_action=args.action is not None)
    for change in changes:
        for note in change.notes:
            io.say(f"{change.path}: {note}")
    writes = [change for change in changes if change.write]
    foreign = [change.path for change in changes if not change.write]
    if not changes:
        io.warn("imm init: up to date")
        return EXIT_OK
    if args.check:
        if writes:
            io.warn(f"imm init --check: {len(writes)} files need an update (run imm init)")
        if foreign:
            io.warn(f"imm init --check: not imm's, at imm's paths: {', '.join(foreign)}")
        return EXIT_NEEDS_HUMAN
    first = not (root / CONFIG_PATH).exists()
    for change in writes:
        path = root / change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(change.text, encoding="utf-8")
    io.warn(f"imm init: {len(writes)} files written")
    if foreign:
        io.warn(f"imm init: left alone, not imm's: {', '.join(foreign)} (see above)")
        return EXIT_NEEDS_HUMAN
    if first:  # a repository new to imm: what it needs before its first batch
        for step in NEXT_STEPS:
            io.warn(step)
    return EXIT_OK


# What a repository needs after `imm init` before its first batch (docs/github.md).
NEXT_STEPS = (
    "next:",
    "  1. set `executor` in .github/imm.yml (docs/github.md's worked example runs Claude Code)",
    "  2. add the secrets your executor needs (ANTHROPIC_API_KEY for Claude Code)",
    "  3. write docs/initiatives/<slug>.md and docs/plans/<task>.intent.json, then: imm check",
    "  4. commit and push; start a batch from the Actions tab (imm-batch, initiative: <slug>)"
    " or comment `/imm run` on the initiative issue",
)
