"""`imm init [--repo P] [--action REF] [--check]`: write `.github/imm.yml` and the workflows, or
bring imm's parts of them up to date (keeping everything else), printing what changed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import EXIT_NEEDS_HUMAN, EXIT_OK
from imm_action.git import repo_root
from imm_action.scaffold.files import changes_for, default_action
from imm_action.workspace import open_repo


@dataclass(frozen=True)
class InitArgs:
    repo: Path
    action: str | None  # what the workflows' steps `uses:` to run imm; None = the default
    check: bool  # only tell whether an update is due (exit 1 when it is)


def run(args: InitArgs, io: CommandIO) -> int:
    root = repo_root(open_repo(args.repo))
    changes = changes_for(root, args.action or default_action(root))
    for change in changes:
        for note in change.notes:
            io.say(f"{change.path}: {note}")
    if not changes:
        io.warn("imm init: up to date")
        return EXIT_OK
    if args.check:
        io.warn(f"imm init --check: {len(changes)} files need an update (run imm init)")
        return EXIT_NEEDS_HUMAN
    for change in changes:
        path = root / change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(change.text, encoding="utf-8")
    io.warn(f"imm init: {len(changes)} files written")
    return EXIT_OK
