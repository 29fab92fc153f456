"""`imm command --event PATH`: answer `/imm` lines in an issue comment (SPEC §5.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, assert_never

from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient
from imm_action.github.comment_commands import HELP, Command, Unknown, parse_comment
from imm_action.github.events import IssueCommentEvent, read_event
from imm_action.github.reporting import needs_continuation
from imm_action.github.transport import DispatchedRun, allows
from imm_action.model.state import BatchRunState, BatchState, GithubRunner

BATCH_WORKFLOW = "imm-batch.yml"


class BatchOperations(Protocol):
    """What a command does to a batch, as text for the reply."""

    def status(self, slug: str) -> str: ...

    def plan(self, slug: str, issue: int | None = None) -> str: ...

    def retry(self, slug: str, task_id: str) -> str: ...

    def active(self, slug: str) -> BatchRunState | None: ...

    def cancel(self, slug: str) -> str: ...


@dataclass(frozen=True)
class CommandArgs:
    event: Path
    allowed_permission: str
    workflow: str = BATCH_WORKFLOW


def reply_marker(comment_id: int) -> str:
    return f"<!-- imm-reply:{comment_id} -->"


@dataclass(frozen=True)
class CommandPorts:
    io: CommandIO
    client: GitHubClient
    operations: Callable[[], BatchOperations]  # built only when a command touches a batch


def run(args: CommandArgs, ports: CommandPorts) -> int:
    io, client, operations = ports.io, ports.client, ports.operations
    event = read_event(args.event)
    if event.action != "created":
        return 0
    parsed = parse_comment(event.comment.body)
    if not parsed:
        return 0
    issue, comment = event.issue.number, event.comment.id
    login = event.sender.login
    role = client.permission(login)
    if not allows(role, args.allowed_permission):
        client.reply(issue, reply_marker(comment), refusal(login, role, args.allowed_permission))
        client.react(issue, comment, "confused")
        io.warn(f"imm command: refused {login} ({role}); nothing ran")
        return 0
    client.react(issue, comment, "eyes")
    answers = [_answer(item, event, args, client, operations) for item in parsed]
    if any(isinstance(item, Unknown) for item in parsed):
        answers.append(HELP)
    client.reply(issue, reply_marker(comment), "\n\n".join(answers))
    return 0


def refusal(login: str, role: str, needed: str) -> str:
    return (
        f"Sorry @{login}, imm commands need `{needed}` permission on this repository "
        f"(you have `{role}`). Nothing was run."
    )


def _answer(
    item: Command | Unknown,
    event: IssueCommentEvent,
    args: CommandArgs,
    client: GitHubClient,
    operations: Callable[[], BatchOperations],
) -> str:
    if isinstance(item, Unknown):
        return f"I did not run `{_quote(item.line)}`: {item.why}."
    slug = event.initiative
    if slug is None:
        return "This issue carries no initiative (no `immune-brain:initiative-id` marker)."
    match item.verb:
        case "run":
            inputs = {"initiative": slug}
            if item.max_parallel is not None:
                inputs["max_parallel"] = str(item.max_parallel)
            started = client.dispatch(args.workflow, event.repository.default_branch, inputs)
            return f"Started the batch of `{slug}`: {_run_named(started, args.workflow)}."
        case "status":
            return operations().status(slug)
        case "plan":
            return operations().plan(slug, event.issue.number)
        case "retry":
            if item.task_id is None:  # parse_comment gives every retry its task id
                return "I did not run `retry`: `retry` takes one task id."
            batch = operations()
            return batch.retry(slug, item.task_id) + _moving(batch.active(slug), slug, event,
                                                              args, client)  # fmt: skip
        case "cancel":
            batch = operations()
            stopped = _stop_runs(batch.active(slug), client)
            return batch.cancel(slug) + stopped
        case _:
            assert_never(item.verb)


def _moving(
    state: BatchRunState | None,
    slug: str,
    event: IssueCommentEvent,
    args: CommandArgs,
    client: GitHubClient,
) -> str:
    """After a retry: a batch left waiting for a run nobody will start gets one (a run that is
    going carries it on by itself); the reply says which."""
    if state is None or state.batch_state is not BatchState.RUNNING:
        return ""
    if not needs_continuation(state, client.run_in_progress):
        going = _runs_in_flight(state)
        if going:
            return f"\n\nRun {', '.join(str(r) for r in going)} is going and carries it on."
        return ""
    inputs = {"initiative": slug, "batch_id": state.batch_id}
    started = client.dispatch(args.workflow, event.repository.default_branch, inputs)
    return f"\n\nNo run was going: started {_run_named(started, args.workflow)} to carry it on."


def _stop_runs(state: BatchRunState | None, client: GitHubClient) -> str:
    """Before a cancel: the workflow runs carrying the batch's lanes are cancelled, so no lane
    job goes on working (an agent, paid) for a batch that stopped."""
    if state is None:
        return ""
    cancelled = [run for run in _runs_in_flight(state) if client.cancel_run(run)]
    if not cancelled:
        return ""
    return f"\n\nCancelled run {', '.join(str(r) for r in cancelled)}, which carried its lanes."


def _runs_in_flight(state: BatchRunState) -> list[int]:
    """The workflow runs carrying the batch's lanes in flight."""
    return sorted(
        {
            child.lane.runner.run_id
            for child in state.children
            if child.state.in_flight
            and child.lane is not None
            and isinstance(child.lane.runner, GithubRunner)
        }
    )


def _run_named(started: DispatchedRun | None, workflow: str) -> str:
    if started is None:
        return f"a run of {workflow}"
    return f"[run {started.run_id}]({started.html_url}) of {workflow}"


def _quote(line: str) -> str:
    # Shown back inside inline code: no backticks, no newlines, bounded length.
    return line.replace("`", "'").replace("\n", " ")[:120]
