"""`imm command --event PATH`: answer `/imm` lines in an issue comment (SPEC §5.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, assert_never

from imm_action.console import CommandIO
from imm_action.github.client import GitHubClient, allows
from imm_action.github.comment_commands import HELP, Command, Unknown, parse_comment
from imm_action.github.events import IssueCommentEvent, read_event

BATCH_WORKFLOW = "imm-batch.yml"


class BatchOperations(Protocol):
    """What a command does to a batch, as text for the reply."""

    def status(self, slug: str) -> str: ...

    def plan(self, slug: str, issue: int | None = None) -> str: ...

    def retry(self, slug: str, task_id: str) -> str: ...

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
            client.dispatch(args.workflow, event.repository.default_branch, inputs)
            return f"Started the batch of `{slug}` ({args.workflow})."
        case "status":
            return operations().status(slug)
        case "plan":
            return operations().plan(slug, event.issue.number)
        case "retry":
            if item.task_id is None:  # parse_comment gives every retry its task id
                return "I did not run `retry`: `retry` takes one task id."
            return operations().retry(slug, item.task_id)
        case "cancel":
            return operations().cancel(slug)
        case _:
            assert_never(item.verb)


def _quote(line: str) -> str:
    # Shown back inside inline code: no backticks, no newlines, bounded length.
    return line.replace("`", "'").replace("\n", " ")[:120]
