"""The command line's tables (SPEC §6): every command, its options and how each argument is
checked — and nothing else: the composition root (`cli.py`) gives each command its handler.
Building it loads no model (ADR 0003: `imm --help` stays fast)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from imm_action import __version__
from imm_action.console import CommandIO
from imm_action.errors import EXIT_INVALID_INPUT

Handler = Callable[[argparse.Namespace, CommandIO], int]
# The formats `imm schema` prints: the keys of imm_action.model.schemas.SCHEMA_MODELS, spelled
# here so that building the parser loads no model (tests/unit/test_cli_startup.py keeps them
# equal).
SCHEMA_NAMES = (
    "config", "descriptor", "initiative", "intent", "plan", "report", "state", "verdict",
)  # fmt: skip


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _usd(text: str) -> float:
    """--max-cost-usd: US dollars, 0 or more (0: no lane starts)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of dollars") from None
    if not 0 <= value <= 1_000_000:  # the models' bound (model/spend.py); NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1000000")
    return value


def _lane_count(text: str) -> int:
    """--max-parallel: 1..256 (a GitHub matrix runs at most 256 jobs; SPEC §7)."""
    # The models (pydantic) load only when an argument needs them: `imm --version` and
    # `imm --help` stay fast (ADR 0003).
    from imm_action.model.plan import MAX_PARALLEL_LIMIT

    value = _positive_int(text)
    if value > MAX_PARALLEL_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{value} is more than {MAX_PARALLEL_LIMIT} "
            f"(at most {MAX_PARALLEL_LIMIT} lanes per run)"
        )
    return value


def _identifier(text: str) -> str:
    """A slug, task id or batch id (SPEC §4.1 id pattern)."""
    from imm_action.model.common import id_problem

    if (why := id_problem(text)) is not None:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not a valid id: {why}")
    return text


def _initiative_ref(text: str) -> str:
    """An initiative's slug, or `#123`: the number of the issue carrying it."""
    if text.startswith("#") and text[1:].isdigit():
        return text
    return _identifier(text)


def _command_line(text: str) -> str:
    """--executor: refused now when it cannot be split into arguments, not by every lane."""
    try:
        argv = shlex.split(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be split into arguments: {error}"
        ) from None
    if not argv:
        raise argparse.ArgumentTypeError("the command is empty")
    return text


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, exit 2 (SPEC §6); `--help` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _options() -> dict[str, _Parser]:
    """Each option more than one command takes, declared once (argparse parent parsers)."""

    def option(*args: str, **kwargs: Any) -> _Parser:
        parent = _Parser(add_help=False)
        parent.add_argument(*args, **kwargs)
        return parent

    return {
        "repo": option("--repo", default=".", help="repository path (default: .)"),
        "remote": option(
            "--remote",
            default=None,
            metavar="NAME",
            help="keep batch refs on this remote (GitHub: origin)",
        ),
        "batch-id": option(
            "--batch-id", type=_identifier, default=None, metavar="ID", help="a specific batch"
        ),
        "max-parallel": option(
            "--max-parallel",
            type=_lane_count,
            default=None,
            metavar="N",
            help="at most N lanes at once",
        ),
        "max-children": option(
            "--max-children",
            type=_positive_int,
            default=None,
            metavar="N",
            help="at most N tasks of the batch get a lane (the budget; default: all)",
        ),
        "executor": option(
            "--executor",
            type=_command_line,
            default=None,
            metavar="CMD",
            help="the command doing each task",
        ),
        "report-format": option("--format", choices=("text", "json", "markdown"), default="text"),
        "text-format": option("--format", choices=("text",), default="text"),
    }


def build_parser(handlers: Mapping[str, Handler]) -> argparse.ArgumentParser:

    parser = _Parser(
        prog="imm",
        description="Run an initiative in parallel lanes and land it through a guarded integrator.",
    )
    parser.add_argument("--version", action="version", version=f"imm {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    o = _options()

    plan = sub.add_parser(
        "plan", help="show the batch plan of an initiative (a dry run)",
        parents=[o["repo"], o["max-parallel"], o["max-children"]],
    )  # fmt: skip
    plan.add_argument(
        "slug",
        type=_initiative_ref,
        help="the initiative slug (docs/initiatives/<slug>.md), or #N: the issue carrying it",
    )
    # default: markdown for a person at a terminal, the plan model's JSON for a script or pipe
    plan.add_argument("--format", choices=("json", "markdown", "matrix"), default=None)
    plan.set_defaults(handler=handlers["plan"])

    check = sub.add_parser(
        "check", help="validate every initiative and intent in the repository", parents=[o["repo"]]
    )
    check.add_argument(
        "--base", default=None, metavar="REF", help="report only files changed since REF"
    )
    check.add_argument(
        "--report", action="store_true",
        help="report a check run with annotations at file:line (GitHub Actions environment)",
    )  # fmt: skip
    check.set_defaults(handler=handlers["check"])

    batch = [o["repo"], o["batch-id"], o["remote"]]
    _add_reconcile(
        sub, handlers, [*batch, o["report-format"], o["max-parallel"], o["max-children"]]
    )

    status = sub.add_parser(
        "status", help="show a batch's report", parents=[*batch, o["report-format"]]
    )
    status.add_argument("slug", nargs="?", type=_identifier, default=None)
    status.set_defaults(handler=handlers["status"])

    run = sub.add_parser(
        "run", help="run a batch here: worktree lanes, live progress",
        parents=[o["repo"], o["max-parallel"], o["max-children"], o["executor"]],
    )  # fmt: skip
    run.add_argument("slug", type=_identifier)
    run.add_argument(
        "--batch-id", type=_identifier, default=None, metavar="ID", help="resume exactly this batch"
    )
    run.add_argument("--json", action="store_true", help="print the final report as JSON")
    run.add_argument(
        "--fresh", action="store_true",
        help="start over from the base branch; the old batch branch is kept under "
        "refs/imm/archive/<batch id> (without it, a stopped batch is continued)",
    )  # fmt: skip
    run.add_argument(
        "--max-cost-usd", type=_usd, default=None, metavar="USD",
        help="no new lane starts once the agents' known spend reaches USD (the batch this run "
        "starts or continues; default: max_cost_usd in .github/imm.yml, else no limit)",
    )  # fmt: skip
    run.set_defaults(handler=handlers["run"])

    lane = sub.add_parser(
        "lane", help="run one admitted lane and publish its outcome",
        parents=[o["repo"], o["remote"], o["executor"]],
    )  # fmt: skip
    lane.add_argument("--batch-id", type=_identifier, required=True, metavar="ID")
    lane.add_argument("--task", type=_identifier, required=True, metavar="TASK")
    lane.add_argument("--log", default=None, metavar="FILE", help="write the lane's log here")
    lane.add_argument(
        "--phase", choices=("all", "fetch", "work", "publish", "bundle"), default="all",
        help="run only one step of the lane (GitHub: fetch, work, bundle; no token after fetch)",
    )  # fmt: skip
    lane.add_argument(
        "--bundle", default=None, metavar="FILE",
        help="--phase bundle: write the lane's outcome and lane branch here as a git bundle",
    )  # fmt: skip
    lane.add_argument(
        "--lane-setup", default=None, metavar="CMD", help="run in the lane before the executor"
    )
    lane.set_defaults(handler=handlers["lane"])

    verify = sub.add_parser(
        "verify", help="run one shard of a round's checks fanned out to verify jobs",
        parents=[o["repo"], o["remote"]],
    )  # fmt: skip
    verify.add_argument("--batch-id", type=_identifier, required=True, metavar="ID")
    verify.add_argument("--shard", type=_positive_int, required=True, metavar="N")
    verify.add_argument(
        "--phase", choices=("all", "fetch", "run"), default="all",
        help="run only one step (GitHub: fetch with a read token, then run with none)",
    )  # fmt: skip
    verify.add_argument(
        "--verdicts", default=None, metavar="DIR",
        help="the folder the shard's verdict file goes in, named after its artifact (outside "
        "the sandbox; the job uploads it)",
    )  # fmt: skip
    verify.set_defaults(handler=handlers["verify"])

    retry = sub.add_parser(
        "retry", help="send a parked task and its skipped dependents back to pending",
        parents=[*batch, o["text-format"]],
    )  # fmt: skip
    retry.add_argument("slug", type=_identifier)
    retry.add_argument("task_id", type=_identifier)
    retry.set_defaults(handler=handlers["retry"])

    cancel = sub.add_parser(
        "cancel", help="cancel the active batch; running lanes stop",
        parents=[*batch, o["text-format"]],
    )  # fmt: skip
    cancel.add_argument("slug", type=_identifier)
    cancel.set_defaults(handler=handlers["cancel"])

    command = sub.add_parser(
        "command", help="answer /imm commands in an issue comment event",
        parents=[o["repo"], o["remote"]],
    )  # fmt: skip
    command.add_argument("--event", required=True, metavar="PATH", help="the event payload file")
    command.set_defaults(handler=handlers["command"])

    _add_setup_commands(sub, handlers, o)
    return parser


def _add_setup_commands(
    sub: argparse._SubParsersAction[_Parser],
    handlers: Mapping[str, Handler],
    o: dict[str, _Parser],
) -> None:
    """Commands that set a repository up or show formats: init, demo, schema."""

    init = sub.add_parser(
        "init", help="write .github/imm.yml and the workflows, or bring them up to date",
        parents=[o["repo"]],
    )  # fmt: skip
    init.add_argument(
        "--action", default=None, metavar="REF",
        help="what the workflows' steps use to run imm (default: ./ where the repository holds "
        "the action, else imm-action/imm-action@v0)",
    )  # fmt: skip
    init.add_argument("--check", action="store_true", help="exit 1 when an update is due")
    init.set_defaults(handler=handlers["init"])

    demo = sub.add_parser("demo", help="create a demo repository and run a real batch on it")
    demo.add_argument("--dir", default=None, metavar="P", help="where (default: a new temp dir)")
    demo.set_defaults(handler=handlers["demo"])

    schema = sub.add_parser("schema", help="print the JSON Schema of a file format")
    schema.add_argument("name", nargs="?", choices=SCHEMA_NAMES)
    schema.add_argument("--write", metavar="DIR", help="write every schema into DIR instead")
    schema.set_defaults(handler=handlers["schema"])


def _add_reconcile(
    sub: argparse._SubParsersAction[_Parser],
    handlers: Mapping[str, Handler],
    parents: list[_Parser],
) -> None:
    rec = sub.add_parser(
        "reconcile", help="run one reconcile pass: observe, integrate, admit, report",
        parents=parents,
    )  # fmt: skip
    rec.add_argument("slug", type=_initiative_ref)
    rec.add_argument("--admit", action="store_true", help="also admit the startable lanes")
    rec.add_argument(
        "--continue-stopped", action="store_true",
        help="continue the latest batch when it stopped, in a continuation batch on the same "
        "branch (what a person's `/imm run` asks for; never on a pass's own continuation)",
    )  # fmt: skip
    rec.add_argument(
        "--lane-bundles", default=None, metavar="DIR",
        help="first import the lane bundles (*.bundle) under DIR: each is checked like a "
        "lane's publish and pushed only when it is an admitted lane's outcome (needs --remote)",
    )  # fmt: skip
    rec.add_argument(
        "--fan-out", action="store_true",
        help="(the stack and bisect jobs on GitHub) run no check: record what the stack owes as "
        "shards for this run's verify jobs when running it here would take longer than "
        "verify_fan_out_seconds",
    )  # fmt: skip
    rec.add_argument(
        "--verdicts", default=None, metavar="DIR",
        help="(the bisect and integrate jobs on GitHub) take the verdict files this run's "
        "verify jobs uploaded, under DIR, for the checks their shards owed",
    )  # fmt: skip
    rec.add_argument(
        "--next-round-asked", action="store_true",
        help="(the integrate job on GitHub) this run's stack job already dispatched the next "
        "round: ask for none again",
    )  # fmt: skip
    rec.add_argument(
        "--report", action="store_true",
        help="report on GitHub (status comment, check run, PR) from the Actions environment",
    )  # fmt: skip
    rec.set_defaults(handler=handlers["reconcile"])
