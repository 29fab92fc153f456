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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from imm_action import credentials
from imm_action.console import CommandIO

if TYPE_CHECKING:
    from imm_action.actions.runtime import ActionsFiles
    from imm_action.carriers.source import InitiativeSource
    from imm_action.commands.reconcile import GitHubReporting
    from imm_action.github.client import GitHubClient
    from imm_action.lanes.github import GitHubRun
    from imm_action.ports import Ports
from imm_action.cli_parser import Handler
from imm_action.cli_parser import build_parser as parser_with
from imm_action.errors import EXIT_BROKEN_PIPE, EXIT_INVALID_INPUT, UsageError
from imm_action.exits import run_guarded


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
    from imm_action.github.client import GitHubClient
    from imm_action.github.transport import build_github

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
        next_round_asked=ns.next_round_asked,
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


HANDLERS: dict[str, Handler] = {
    "plan": _plan, "check": _check, "status": _status, "run": _run, "lane": _lane,
    "verify": _verify, "retry": _retry, "cancel": _cancel, "command": _command,
    "reconcile": _reconcile, "init": _init, "demo": _demo, "schema": _schema,
}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The command line, each command with its handler."""
    return parser_with(HANDLERS)


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
    if argv is None:
        # Python's exit collects every object the command made (pydantic's schemas, the
        # modules'): a tenth to a quarter of a short command's CPU, and a GitHub job runs a
        # dozen of them. Only that last collection is skipped: atexit hooks still run, and what the
        # command opened it closed itself (ADR 0064).
        gc.freeze()
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
