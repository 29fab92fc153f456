"""The composition root: parses the command line, builds real adapters, maps errors to exit codes.

This is the only module that reads the process environment or touches real streams; everything
below it receives what it needs.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from imm_action import __version__, credentials
from imm_action.console import CommandIO

if TYPE_CHECKING:
    from imm_action.actions.runtime import ActionsFiles
    from imm_action.carriers.source import InitiativeSource
    from imm_action.commands.reconcile import GitHubReporting
    from imm_action.github.client import GitHubClient
    from imm_action.lanes.github import GitHubRun
    from imm_action.ports import Ports
from imm_action.errors import EXIT_BROKEN_PIPE, EXIT_INVALID_INPUT, UsageError
from imm_action.exits import run_guarded

Handler = Callable[[argparse.Namespace, CommandIO], int]
# The formats `imm schema` prints: the keys of imm_action.model.SCHEMA_MODELS, spelled here so
# that building the parser loads no model (tests/unit/test_cli_startup.py keeps them equal).
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


def _plan(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import plan

    initiatives = _initiatives(Path(ns.repo))
    slug = initiatives.slug_of(ns.slug)  # an `initiative` input may name the issue: `#123`
    shown: plan.PlanFormat = ns.format or ("markdown" if io.out.isatty() else "json")
    args = plan.PlanArgs(slug, Path(ns.repo), shown, ns.max_parallel, ns.max_children)
    from imm_action.ports import Ports

    return plan.run(args, Ports(io, initiatives))


def _ports(ns: argparse.Namespace, io: CommandIO) -> Ports:
    """What most commands work through: the streams and the initiatives of `--repo`."""
    from imm_action.ports import Ports

    return Ports(io, _initiatives(Path(ns.repo)))


def _initiatives(repo: Path, client: GitHubClient | None = None) -> InitiativeSource:
    """Where every command reads initiatives, chosen here once (SPEC §4.4): the files of `repo`,
    then the repository's GitHub issues when the environment names a repository and a token."""
    from imm_action.carriers.source import Initiatives, NoIssueSource

    if not credentials.token() or not os.environ.get("GITHUB_REPOSITORY"):
        return Initiatives(repo, NoIssueSource())
    from imm_action.carriers.github import GitHubSource

    if client is None:
        client, _ = _github_client("reading a GitHub-carried initiative")
    repository = os.environ["GITHUB_REPOSITORY"]
    issues = GitHubSource(
        client, repository, os.environ.get("GITHUB_REPOSITORY_ID", ""), client.repository_id
    )
    return Initiatives(repo, issues)


def _check(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import check

    report = None
    if ns.report:
        client, _ = _github_client("imm check --report")
        head = os.environ.get("IMM_HEAD_SHA") or os.environ.get("GITHUB_SHA", "")
        if len(head) != 40:
            raise UsageError("imm check --report needs the commit to report on (GITHUB_SHA)")
        report = check.CheckReport(client, head)
    args = check.CheckArgs(Path(ns.repo), ns.base, annotate=_actions_files() is not None)
    return check.run(args, check.CheckPorts(io, report))


def _schema(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import schema

    return schema.run(schema.SchemaArgs(ns.name, Path(ns.write) if ns.write else None), io)


def _github_client(what: str) -> tuple[GitHubClient, str]:
    """The GitHub client of the Actions environment, and the repository it acts on."""
    from imm_action.github.client import GitHubClient, build_github

    token = credentials.token()
    repository = os.environ.get("GITHUB_REPOSITORY")
    if not token or not repository:
        raise UsageError(f"{what} needs GITHUB_TOKEN and GITHUB_REPOSITORY in the environment")
    api_url = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    client = GitHubClient(
        build_github(token, api_url), repository, graphql_url=os.environ.get("GITHUB_GRAPHQL_URL")
    )
    return client, repository


def _github_reporting(ns: argparse.Namespace) -> GitHubReporting | None:
    """GitHub's side of a pass, from the Actions environment (`--report`)."""
    if not ns.report:
        return None
    from imm_action.commands.reconcile import GitHubReporting

    client, repository = _github_client("imm reconcile --report")
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    ref = os.environ.get("GITHUB_REF_NAME", "main")
    # act sets no GITHUB_WORKFLOW_REF, and a reusable workflow's caller names its own file: the
    # workflow to dispatch for the next round is named by the workflow (default imm-batch.yml).
    workflow = os.environ.get("IMM_BATCH_WORKFLOW") or "imm-batch.yml"
    default_token = os.environ.get("IMM_DEFAULT_TOKEN") == "true"
    return GitHubReporting(
        client, f"{server}/{repository}", workflow=workflow, ref=ref,
        default_token=default_token,
    )  # fmt: skip


def _actions_files() -> ActionsFiles | None:
    """$GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY when running as a GitHub Actions step."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return None
    from imm_action.actions.runtime import ActionsFiles

    output, summary = os.environ.get("GITHUB_OUTPUT"), os.environ.get("GITHUB_STEP_SUMMARY")
    return ActionsFiles(Path(output) if output else None, Path(summary) if summary else None)


def _reconcile(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import reconcile

    reporting = _github_reporting(ns)
    initiatives = _initiatives(Path(ns.repo), reporting.client if reporting else None)
    args = reconcile.ReconcileArgs(
        initiatives.slug_of(ns.slug),  # an `initiative` input may name the issue: `#123`
        Path(ns.repo),
        ns.batch_id,
        ns.admit,
        ns.remote,
        ns.format,
        os.environ.get("PATH", ""),
        max_parallel=ns.max_parallel,
        max_children=ns.max_children,
        actions=_actions_files(),
        continue_stopped=ns.continue_stopped,
        given_as=ns.slug,
        lane_bundles=Path(ns.lane_bundles) if ns.lane_bundles else None,
        fan_out=ns.fan_out,
        verdicts=Path(ns.verdicts) if ns.verdicts else None,
    )
    return reconcile.run(args, reconcile.ReconcilePorts(io, initiatives, reporting, _github_run()))


def _github_run() -> GitHubRun | None:
    """The workflow run a pass runs in, inside GitHub Actions: the lanes it admits are that
    run's matrix jobs, and the jobs of lanes in flight are read through the API."""
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if os.environ.get("GITHUB_ACTIONS") != "true" or not run_id.isdigit():
        return None
    from imm_action.lanes.github import GitHubRun

    client, _ = _github_client("imm reconcile in GitHub Actions (to watch its lane jobs)")
    attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
    return GitHubRun(client, int(run_id), int(attempt) if attempt.isdigit() else 1)


def _status(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import status

    args = status.StatusArgs(ns.slug, Path(ns.repo), ns.batch_id, ns.remote, ns.format)
    return status.run(args, _ports(ns, io))


def _lane(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import lane

    args = lane.LaneArgs(
        ns.batch_id, ns.task, Path(ns.repo), ns.remote, ns.executor,
        Path(ns.log) if ns.log else None, dict(os.environ),
        phase=ns.phase, lane_setup=ns.lane_setup, actions=_actions_files(),
        bundle=Path(ns.bundle) if ns.bundle else None,
    )  # fmt: skip
    return lane.run(args, _ports(ns, io))


def _verify(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import verify

    args = verify.VerifyArgs(
        ns.batch_id, ns.shard, Path(ns.repo), ns.remote, dict(os.environ), phase=ns.phase,
        verdicts=Path(ns.verdicts) if ns.verdicts else None, actions=_actions_files(),
    )  # fmt: skip
    return verify.run(args, _ports(ns, io))


def _init(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import init

    return init.run(init.InitArgs(Path(ns.repo), ns.action, ns.check), io)


def _run(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import run

    args = run.RunArgs(
        ns.slug, Path(ns.repo), ns.max_parallel, ns.executor, ns.batch_id, ns.json,
        dict(os.environ), ns.fresh, ns.max_children, ns.max_cost_usd,
    )  # fmt: skip
    return run.run(args, _ports(ns, io))


def _retry(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.commands import retry

    args = retry.RetryArgs(
        ns.slug, Path(ns.repo), ns.batch_id, ns.remote, os.environ.get("PATH", ""), ns.task_id
    )
    return retry.run(args, _ports(ns, io))


def _cancel(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.batches.decisions import DecisionArgs
    from imm_action.commands import cancel

    args = DecisionArgs(ns.slug, Path(ns.repo), ns.batch_id, ns.remote, os.environ.get("PATH", ""))
    return cancel.run(args, _ports(ns, io))


def _command(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.batches.operations import RepoBatchOperations
    from imm_action.commands import command
    from imm_action.workspace import load_config

    client, _ = _github_client("imm command")
    repo = Path(ns.repo)
    config = load_config(repo).config
    args = command.CommandArgs(Path(ns.event), config.commands.allowed_permission)
    path_env = os.environ.get("PATH", "")
    initiatives = _initiatives(repo, client)
    ports = command.CommandPorts(
        io, client, lambda: RepoBatchOperations(repo, ns.remote, path_env, initiatives)
    )
    return command.run(args, ports)


def _demo(ns: argparse.Namespace, io: CommandIO) -> int:
    from imm_action.carriers.source import Initiatives, NoIssueSource
    from imm_action.commands import demo

    args = demo.DemoArgs(Path(ns.dir) if ns.dir else None, dict(os.environ))
    # The demo repository is local by construction: its initiative is a file.
    return demo.run(args, demo.DemoPorts(io, lambda root: Initiatives(root, NoIssueSource())))


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


def build_parser() -> argparse.ArgumentParser:

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
    plan.set_defaults(handler=_plan)

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
    check.set_defaults(handler=_check)

    batch = [o["repo"], o["batch-id"], o["remote"]]
    _add_reconcile(sub, [*batch, o["report-format"], o["max-parallel"], o["max-children"]])

    status = sub.add_parser(
        "status", help="show a batch's report", parents=[*batch, o["report-format"]]
    )
    status.add_argument("slug", nargs="?", type=_identifier, default=None)
    status.set_defaults(handler=_status)

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
    run.set_defaults(handler=_run)

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
    lane.set_defaults(handler=_lane)

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
    verify.set_defaults(handler=_verify)

    retry = sub.add_parser(
        "retry", help="send a parked task and its skipped dependents back to pending",
        parents=[*batch, o["text-format"]],
    )  # fmt: skip
    retry.add_argument("slug", type=_identifier)
    retry.add_argument("task_id", type=_identifier)
    retry.set_defaults(handler=_retry)

    cancel = sub.add_parser(
        "cancel", help="cancel the active batch; running lanes stop",
        parents=[*batch, o["text-format"]],
    )  # fmt: skip
    cancel.add_argument("slug", type=_identifier)
    cancel.set_defaults(handler=_cancel)

    command = sub.add_parser(
        "command", help="answer /imm commands in an issue comment event",
        parents=[o["repo"], o["remote"]],
    )  # fmt: skip
    command.add_argument("--event", required=True, metavar="PATH", help="the event payload file")
    command.set_defaults(handler=_command)

    _add_setup_commands(sub, o)
    return parser


def _add_setup_commands(
    sub: argparse._SubParsersAction[_Parser],
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
    init.set_defaults(handler=_init)

    demo = sub.add_parser("demo", help="create a demo repository and run a real batch on it")
    demo.add_argument("--dir", default=None, metavar="P", help="where (default: a new temp dir)")
    demo.set_defaults(handler=_demo)

    schema = sub.add_parser("schema", help="print the JSON Schema of a file format")
    schema.add_argument("name", nargs="?", choices=SCHEMA_NAMES)
    schema.add_argument("--write", metavar="DIR", help="write every schema into DIR instead")
    schema.set_defaults(handler=_schema)


def main(argv: Sequence[str] | None = None) -> int:
    # A plan of 10,000 tasks allocates millions of small objects and none of them form cycles
    # worth collecting early; the default thresholds spend ~30% of `imm plan` in the collector.
    gc.set_threshold(100_000, 50, 1000)
    parser = build_parser()
    program = "imm" if argv is not None else program_name(sys.argv[0])
    if os.environ.get("IMM_DEBUG"):  # the debug log: what imm does that is normal, such as
        # re-running a pass after another writer moved a ref first
        logging.basicConfig(level=logging.DEBUG, format="imm debug: %(message)s")
    try:
        ns = parser.parse_args(argv)
    except SystemExit as stop:  # a usage error (one line, exit 2), --help or --version
        return stop.code if isinstance(stop.code, int) else EXIT_INVALID_INPUT
    handler: Handler = ns.handler
    try:
        # the action's token, from the file it left (never from an environment): first thing
        credentials.take_credentials(own_process=argv is None)
    except credentials.CredentialError as error:
        print(f"{program}: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    runner_temp = os.environ.get("RUNNER_TEMP")
    code = run_guarded(
        ns.command,
        lambda io: handler(ns, io),
        CommandIO(sys.stdout, sys.stderr, program),
        crash_dir=Path(runner_temp) if runner_temp else None,
        annotate=os.environ.get("GITHUB_ACTIONS") == "true",
    )
    if code == EXIT_BROKEN_PIPE:
        # the reader of our output went away (`imm status | head -1`): end quietly, without
        # Python's "Exception ignored ... BrokenPipeError" when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


def program_name(argv0: str) -> str:
    """How to write `imm` in a command the person can paste into a fresh shell: as they invoked
    it, made absolute when a fresh shell would not find it (a path, `python -m`, or a script
    of a virtual environment that is not activated there)."""
    import shutil

    if Path(argv0).name == "__main__.py":  # python -m imm_action
        return shlex.join([sys.executable, "-m", "imm_action"])
    if os.sep in argv0:
        return shlex.quote(str(Path(argv0).absolute()))
    found = shutil.which(argv0)
    if found is None:
        return shlex.quote(argv0)
    in_venv = sys.prefix != sys.base_prefix
    return shlex.quote(found) if in_venv else argv0


def _add_reconcile(sub: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
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
        "--report", action="store_true",
        help="report on GitHub (status comment, check run, PR) from the Actions environment",
    )  # fmt: skip
    rec.set_defaults(handler=_reconcile)
