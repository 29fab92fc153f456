"""`imm reconcile <slug>`: one reconcile pass (GitHub plan/integrate jobs, or by hand)."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from github import GithubException

from imm_action.actions.runtime import (
    ActionsFiles,
    append_summary,
    pass_outputs,
    verify_outputs,
    write_outputs,
)
from imm_action.actions.summary import config_warnings_markdown, pass_summary
from imm_action.batches.output import exit_code_for, print_report
from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.batches.repo import (
    BatchRepo,
    check_place,
    config_warning_lines,
    open_batch_repo,
    setup_commit,
    with_overrides,
)
from imm_action.console import CommandIO
from imm_action.errors import ImmError, UsageError
from imm_action.git.refs import RemoteRefStore
from imm_action.github.client import GitHubClient
from imm_action.github.reporting import needs_continuation, publish_report, target_for
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.shards import FanOutRules
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.lanes.bundles import BundleNote, describe, import_lane_bundles, summary_of
from imm_action.lanes.github import GitHubRun, import_left_bundles
from imm_action.model.refs import batch_branch, heads
from imm_action.model.state import BatchState
from imm_action.passes.driver import reconcile
from imm_action.passes.request import FanOut, RoundAlive, RoundVerdicts
from imm_action.ports import Ports
from imm_action.verify.check_queue import default_workers
from imm_action.verify.verdicts import read_verdict_files


@dataclass(frozen=True)
class ReconcileArgs:
    slug: str
    repo: Path
    batch_id: str | None
    admit: bool
    remote: str | None
    format: str
    path_env: str
    max_parallel: int | None = None  # overrides the config's for a new batch
    max_children: int | None = None  # likewise: the budget of a new batch
    actions: ActionsFiles | None = None  # on GitHub Actions: step outputs and job summary
    # A person asked to run the initiative (`/imm run`): a stopped batch is continued.
    continue_stopped: bool = False
    # The initiative as the command line named it ("#123" or the slug): the next round is
    # dispatched with the same words, so it queues in this round's concurrency group.
    given_as: str | None = None
    # The integrate job on GitHub: lane jobs' bundles (downloaded artifacts) to import first.
    lane_bundles: Path | None = None
    # The stack and bisect jobs on GitHub: fan what the stack owes out to this run's verify
    # jobs (issue 32).
    fan_out: bool = False
    # The bisect and integrate jobs on GitHub: the verdict files this run's verify jobs uploaded.
    verdicts: Path | None = None
    # The integrate job on GitHub: this run's stack job dispatched the next round already
    # (pipelined rounds, ADR 0075), so this job asks for none.
    next_round_asked: bool = False


DEFAULT_TOKEN_NOTE = (
    "_This batch runs with the workflow's default `GITHUB_TOKEN`: what it pushes starts no "
    "workflow, so your CI does not run on the batch pull request. Pass a GitHub App token as "
    "the action's `github-token` for that._"
)
UNISOLATED_NOTE = (
    "_Checks run unconfined ({why}): code a lane wrote, run by a check, can reach this job's "
    "token. Run imm where bubblewrap can make its namespaces (Linux, directly or through "
    "passwordless sudo, as on GitHub's hosted runners), and drop `sandbox: none` from the "
    "config if it is there._"
)


@dataclass(frozen=True)
class GitHubReporting:
    """Where a pass on GitHub reports (SPEC §5.6) and how it asks for a continuation."""

    client: GitHubClient
    repository_url: str
    workflow: str = "imm-batch.yml"
    ref: str = "main"
    default_token: bool = False  # the workflow's GITHUB_TOKEN: say what it cannot do


@dataclass(frozen=True)
class ReconcilePorts(Ports):
    reporting: GitHubReporting | None = None  # --report: GitHub's side of the pass
    # Inside a GitHub Actions run, the lanes are that run's matrix jobs; elsewhere admitted
    # lanes wait for `imm lane`.
    github_run: GitHubRun | None = None


def run(args: ReconcileArgs, ports: ReconcilePorts) -> int:
    io, github = ports.io, ports.reporting
    batch_repo = with_overrides(
        open_batch_repo(args.repo, args.remote, ports.initiatives),
        max_parallel=args.max_parallel,
        max_children=args.max_children,
    )
    for line in config_warning_lines(batch_repo):
        io.warn(line)
    if args.actions is not None and batch_repo.config_warnings:
        append_summary(args.actions, config_warnings_markdown(batch_repo.config_warnings))
    if args.lane_bundles is not None or ports.github_run is not None:
        _import_bundles(args, io, batch_repo, ports.github_run)
    # where the last report may have put a running check (ended once the branch moves on)
    branch = heads(batch_branch(args.slug))
    start_head = batch_repo.refs.read([branch])[branch]
    stopped = Stopped.CONTINUE if args.continue_stopped else Stopped.RESUME
    request = pass_request(
        batch_repo, args.slug, batch_id=args.batch_id, admit=args.admit, stopped=stopped
    )
    request = replace(
        request,
        parallel_asked=args.max_parallel,
        **_verify_jobs(args, batch_repo, ports.github_run),
    )
    lanes = None
    if ports.github_run is not None:
        queue_timeout = timedelta(minutes=batch_repo.config.lane_queue_timeout_minutes)
        lanes = ports.github_run.lanes(queue_timeout)

    def log(line: str) -> None:
        io.warn(f"imm: {line}")

    # a pass that reports on GitHub or moves a remote's refs holds a credential
    holds_token = github is not None or args.remote is not None
    place = check_place(batch_repo, args.path_env, log, holds_token=holds_token,
                        setup_at=setup_commit(batch_repo, args.slug))  # fmt: skip
    pass_io = pass_ports(batch_repo, log, path_env=args.path_env, lanes=lanes, place=place)
    try:
        result = reconcile(request, pass_io)
    finally:
        place.close()
    if result.admitted:
        io.warn(f"imm: admitted {', '.join(result.admitted)}")
    stored = result.stored
    next_round = False
    if github is not None:
        earlier = tuple(h for h in (start_head, stored.state.base_head) if h is not None)
        _report(github, batch_repo, stored, args, unisolated=place.confinement.unconfined_reason,
                earlier_heads=earlier)  # fmt: skip
        next_round = _next_round(
            github, args, stored, result.startable, round_alive=request.round_alive, io=io
        )
    if args.actions is not None and stored.report is not None:
        timeout = batch_repo.config.lane_timeout_minutes
        outputs = pass_outputs(stored.state, result.admitted, timeout)
        if request.fan_out is not None:
            stage = 2 if args.verdicts is not None else 1  # the bisect job's, or the stack job's
            outputs.update(verify_outputs(stored.state, request.fan_out.run_id, stage))
        outputs["next-round"] = "true" if next_round else "false"
        write_outputs(args.actions, outputs)
        url = github.repository_url if github is not None else ""
        integration = [stack.line() for stack in result.stacks]
        append_summary(args.actions, pass_summary(stored.report, stored.state, url, integration))
    print_report(stored, args.format, io, batch_repo.root)
    return exit_code_for(stored.state.batch_state)


def _verify_jobs(
    args: ReconcileArgs, batch_repo: BatchRepo, github_run: GitHubRun | None
) -> dict[str, Any]:
    """What a pass of the shipped workflow knows of its verify jobs (decision 0054): every
    pass on GitHub leaves a stack whose round is recorded to its verify jobs; the stack and
    bisect jobs fan out; the bisect and integrate jobs take the verdicts."""
    if github_run is None and not (args.fan_out or args.verdicts):
        return {}
    run_id = github_run.run_id if github_run is not None else _run_id_from_environment()
    config = batch_repo.config
    workers = config.verify_parallel or default_workers().floor
    rules = FanOutRules(config.verify_runners, workers, config.verify_fan_out_seconds * 1000)
    found: dict[str, Any] = {"verify_jobs": True}
    if github_run is not None:
        found["round_alive"] = _round_alive(github_run)
    if args.fan_out:
        found["fan_out"] = FanOut(run_id, rules)
    if args.verdicts is not None:
        found["verdicts"] = RoundVerdicts(run_id, read_verdict_files(args.verdicts))
    return found


def _round_alive(github_run: GitHubRun) -> RoundAlive:
    """Whether another run's integrate job may still come — the run is in progress and its
    integrate job has not ended — so that its round and its lanes are left to it (ADR 0075);
    asked of GitHub once per run and pass."""
    client = github_run.client

    @functools.cache
    def alive(run_id: int) -> bool:
        if run_id == github_run.run_id or not client.run_in_progress(run_id):
            return False
        jobs = client.run_jobs(run_id) or []
        return not any(job.status == "completed" and _integrate_job(job.name) for job in jobs)

    return alive


def _integrate_job(name: str) -> bool:
    """The shipped workflow's integrate job, called from another workflow (`caller / integrate`)
    or not."""
    return name == "integrate" or name.endswith(" / integrate")


def _run_id_from_environment() -> int:
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if not run_id.isdigit() or int(run_id) < 1:
        raise UsageError("--fan-out and --verdicts run in a GitHub Actions run (GITHUB_RUN_ID)")
    return int(run_id)


def _import_bundles(
    args: ReconcileArgs, io: CommandIO, batch_repo: BatchRepo, run: GitHubRun | None
) -> None:
    """Before the pass, as untrusted input (ADR 0026): this run's lane bundles (downloaded by
    the integrate job), and on GitHub those an earlier run's lane jobs uploaded that no
    integrate job imported — the run was cancelled, or its integrate job failed (issue 31)."""
    remote = batch_repo.refs
    if not isinstance(remote, RemoteRefStore):
        if args.lane_bundles is None:
            return  # a pass on GitHub without --remote: nothing of the lanes' is here
        raise UsageError("--lane-bundles needs --remote (the lanes' refs go to the remote)")
    remote.refresh()
    stored = _stored_for(args, remote)
    if stored is None:
        if args.lane_bundles is not None:
            io.warn(f"imm: no batch to import the lane bundles in {args.lane_bundles} for")
        return
    if args.lane_bundles is not None:
        _said(args, io, import_lane_bundles(remote, args.lane_bundles, stored.state))
    if run is not None and not stored.state.batch_state.is_terminal:
        with tempfile.TemporaryDirectory(prefix="imm-left-bundles-") as folder:
            left = import_left_bundles(run.client, remote, stored.state, run.run_id, Path(folder))
            _said(args, io, left)


def _stored_for(args: ReconcileArgs, remote: RemoteRefStore) -> StoredBatch | None:
    store = StateStore(remote)
    stored = store.load(args.batch_id) if args.batch_id else None
    if stored is None and args.batch_id is None:
        batches = store.batches_of(args.slug)
        stored = batches[-1] if batches else None
    return stored


def _said(args: ReconcileArgs, io: CommandIO, notes: list[BundleNote]) -> None:
    for note in notes:
        io.warn(f"imm: {describe(note)}")
    if args.actions is not None and notes:
        append_summary(args.actions, summary_of(notes))


def _report(
    github: GitHubReporting,
    batch_repo: BatchRepo,
    stored: StoredBatch,
    args: ReconcileArgs,
    *,
    unisolated: str | None,
    earlier_heads: tuple[str, ...] = (),
) -> None:
    state = stored.state
    if stored.report is None:
        raise ImmError(f"batch {state.batch_id} has no report at {stored.commit[:12]}")
    branch = heads(state.branch)
    head = batch_repo.refs.read([branch])[branch] or state.base_head
    target = replace(target_for(state, head, github.repository_url), earlier_heads=earlier_heads)
    notes = [DEFAULT_TOKEN_NOTE] if github.default_token else []
    if unisolated:  # only under `sandbox: none`: a token refuses it otherwise
        notes.append(UNISOLATED_NOTE.format(why=unisolated))
    if notes:
        target = replace(target, footer="\n\n".join(notes))
    if batch_repo.config.close_integrated_issues and target.issue_number is not None:
        issues = batch_repo.initiatives.task_issues(state.initiative_slug)
        target = replace(target, close_integrated=True, task_issues=issues)
    publish_report(github.client, stored.report, state, target)


def _next_round(
    github: GitHubReporting,
    args: ReconcileArgs,
    stored: StoredBatch,
    startable: Sequence[str],
    *,
    round_alive: RoundAlive,
    io: CommandIO,
) -> bool:
    """Ask for the next round; whether this job did. The plan job admits, and the bisect job
    hands on to the jobs after it. The stack job asks as soon as lanes could start — on its
    stack's lane commits (speculative lanes), or in slots this run's lanes freed — so they run
    while the stack is verified (pipelined rounds, ADR 0075); the integrate job asks when the
    batch still waits on lanes or verify jobs nobody will start, unless the stack job asked."""
    state = stored.state
    if args.admit or state.batch_state is not BatchState.RUNNING:
        return False
    inputs = continuation_inputs(args.given_as or args.slug, state.batch_id)
    if not args.fan_out:
        if args.next_round_asked or not needs_continuation(state, round_alive):
            return False
        github.client.dispatch(github.workflow, github.ref, inputs)
        return True
    if args.verdicts is not None or not startable:
        return False
    try:  # early, to gain time: a refusal costs the time, not the round
        github.client.dispatch(github.workflow, github.ref, inputs)
    except (GithubException, ImmError) as error:
        io.warn(
            f"imm: the next round was not dispatched early ({_refusal(error)}); the integrate job "
            "dispatches it. A workflow of before ADR 0075 gives the stack job `actions: read` "
            "only: `imm init` updates it"
        )
        return False
    io.warn(
        f"imm: dispatched the next round for {', '.join(startable)}: its lanes run while this "
        "stack is verified"
    )
    return True


def _refusal(error: Exception) -> str:
    if isinstance(error, GithubException):
        message = error.data.get("message") if isinstance(error.data, dict) else error.data
        return f"{error.status} {message}"
    return str(error)


def continuation_inputs(initiative: str, batch_id: str) -> dict[str, str]:
    """What the next round's dispatch sends: the workflow must declare each input (else 422)."""
    return {"initiative": initiative, "batch_id": batch_id, "pass": "continue"}
