"""Building batches in real repositories: projects, lane commits, outcomes and passes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.batches.repo import BatchRepo, open_batch_repo
from imm_action.carriers.source import Initiatives, NoIssueSource
from imm_action.git.refs import RefStore
from imm_action.git.repo import GitRepo
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.lanes.outcome import publish_outcome
from imm_action.model.outcome import OUTCOME_CONTRACT, Failure, LaneOutcome
from imm_action.model.spend import AgentRun
from imm_action.passes.driver import reconcile
from imm_action.passes.request import PassResult
from tests.conftest import descriptor, git, initiative_files, intent, make_repo

TRAILER = "Immune-Brain-Batch"


def task_file_check(task: str, *, unbroken: bool = False) -> str:
    """`task`'s file (`<task>.txt`) holds its name; with `unbroken`, no task's file says
    `broken` either: a lane that writes it breaks this check from its own level up."""
    others = (
        " and not any('broken' in p.read_text() for p in pathlib.Path('.').glob('?.txt'))"
        if unbroken
        else ""
    )
    code = (
        f"import pathlib,sys; t=pathlib.Path({task + '.txt'!r}); "
        f"ok=t.exists() and {task!r} in t.read_text(){others}; sys.exit(0 if ok else 1)"
    )
    return descriptor(["-c", code])


def file_check(path: str, must_contain: str, *, absent: str | None = None) -> str:
    """A descriptor asserting a file's content, run by python3 without a shell."""
    code = (
        f"import pathlib,sys; p=pathlib.Path({path!r}); t=p.read_text() if p.exists() else ''; "
        f"ok={must_contain!r} in t"
        + (f" and {absent!r} not in pathlib.Path('config.txt').read_text()" if absent else "")
        + "; sys.exit(0 if ok else 1)"
    )
    return descriptor(["-c", code])


def make_project(
    root: Path,
    tasks: Mapping[str, list[str]],
    *,
    scopes: Mapping[str, list[str]] | None = None,
    checks: Mapping[str, str] | None = None,
    extra_files: Mapping[str, str] | None = None,
    slug: str = "init",
) -> Path:
    intents = {}
    for task in tasks:
        acceptance = [{"id": "ok", "assertion": f"{task} works", "verification":
                       (checks or {}).get(task, file_check(f"{task}.txt", task))}]  # fmt: skip
        intents[task] = intent(
            task, scope_hint=(scopes or {}).get(task, [f"{task}.txt"]), acceptance=acceptance
        )
    files = initiative_files(slug, tasks, intents)
    files.update(extra_files or {"config.txt": "mode=ok\n", "shared.txt": "base\n"})
    return make_repo(root, files)


def open_local(repo: Path, remote: str | None = None) -> BatchRepo:
    return open_batch_repo(repo, remote, Initiatives(repo, NoIssueSource()))


def run_pass(
    repo: Path,
    slug: str = "init",
    *,
    admit: bool = True,
    remote: str | None = None,
    refs: RefStore | None = None,
    log: list[str] | None = None,
    debug: list[str] | None = None,
) -> PassResult:
    batch_repo = open_local(repo, remote)
    request = pass_request(batch_repo, slug, batch_id=None, admit=admit)
    # a fixed id for a new batch: lane commits carry it, so runs can be compared commit by commit
    request = dataclasses.replace(
        request, new_batch_id=f"batch-{slug}-{len(StateStore(batch_repo.refs).all_batches())}"
    )
    ports = pass_ports(batch_repo, (log.append if log is not None else lambda line: None),
                       path_env=os.environ["PATH"])  # fmt: skip
    if refs is not None:
        ports = dataclasses.replace(ports, refs=refs)
    if debug is not None:
        ports = dataclasses.replace(ports, debug=debug.append)
    return reconcile(request, ports)


def current(repo: Path, slug: str = "init", remote: str | None = None) -> StoredBatch:
    batch_repo = open_local(repo, remote)
    batch_repo.refs.refresh()
    stored = StateStore(batch_repo.refs).batches_of(slug)
    assert stored, "no batch"
    return stored[-1]


def make_lane_commit(
    repo: Path,
    base: str,
    task_id: str,
    files: Mapping[str, str | None],
    *,
    batch_id: str,
    goal: str | None = None,
    parents: list[str] | None = None,
    author: tuple[str, str] = ("Lane Author", "lane@example.com"),
    links: Mapping[str, str] | None = None,
) -> str:
    """A lane commit as a lane makes it: one commit on the lane base, message + trailer;
    `files`: what it writes (None: it removes the file); `links`: symlinks it adds (path ->
    target)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
        run = lambda *args, stdin=None: subprocess.run(  # noqa: E731
            ["git", *args],
            cwd=repo,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        run("read-tree", base)
        for path, content in files.items():
            if content is None:
                run("update-index", "--force-remove", path)
                continue
            blob = run("hash-object", "-w", "--stdin", stdin=content)
            run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        for path, target in (links or {}).items():
            blob = run("hash-object", "-w", "--stdin", stdin=target)
            run("update-index", "--add", "--cacheinfo", f"120000,{blob},{path}")
        tree = run("write-tree")
        message = f"imm({task_id}): {goal or f'Do {task_id}'}\n\n{TRAILER}: {batch_id}\n"
        # fixed dates: the same lane work always makes the same commit, so runs compare exactly
        env.update(
            GIT_AUTHOR_NAME=author[0],
            GIT_AUTHOR_EMAIL=author[1],
            GIT_AUTHOR_DATE="1700000000 +0000",
            GIT_COMMITTER_DATE="1700000000 +0000",
        )
        parent_args = [arg for parent in (parents or [base]) for arg in ("-p", parent)]
        return run("commit-tree", tree, *parent_args, "-m", message)


def publish(
    repo: Path,
    task_id: str,
    lane_commit: str | None,
    *,
    slug: str = "init",
    state: str = "settled",
    reason: str | None = None,
    remote: str | None = None,
    failures: list[Failure] | None = None,
    qa_failures: int = 0,
    durations_ms: dict[str, int] | None = None,
    agent_runs: list[AgentRun] | None = None,
) -> None:
    batch_repo = open_local(repo, remote)
    batch_repo.refs.refresh()
    stored = current(repo, slug, remote)
    child = next(c for c in stored.state.children if c.task_id == task_id)
    outcome = LaneOutcome(
        contract=OUTCOME_CONTRACT,
        batch_id=stored.state.batch_id,
        task_id=task_id,
        attempt=child.attempts,
        state=state,  # type: ignore[arg-type]
        reason=reason,
        qa_failures=qa_failures,
        findings=[],
        lane_commit=lane_commit,
        failures=failures or [],
        durations_ms=durations_ms or {},
        agent_runs=agent_runs or [],
    )
    publish_outcome(batch_repo.refs, slug, outcome, "1700000000 +0000")


def lane_of(repo: Path, task_id: str, slug: str = "init") -> tuple[str, str]:
    """(batch id, lane base) of an admitted child."""
    stored = current(repo, slug)
    child = next(c for c in stored.state.children if c.task_id == task_id)
    assert child.lane is not None, f"{task_id} has no lane"
    return stored.state.batch_id, child.lane.base_head


def work(
    repo: Path,
    task_id: str,
    files: Mapping[str, str | None] | None = None,
    slug: str = "init",
    agent_runs: list[AgentRun] | None = None,
    **kw: object,
) -> str:
    """Do a task's lane: commit on its lane base and publish the outcome."""
    batch_id, base = lane_of(repo, task_id, slug)
    commit = make_lane_commit(
        repo, base, task_id, files or {f"{task_id}.txt": f"{task_id}\n"}, batch_id=batch_id, **kw
    )  # type: ignore[arg-type]
    publish(repo, task_id, commit, slug=slug, agent_runs=agent_runs)
    return commit


def branch_log(repo: Path, slug: str = "init") -> list[str]:
    return git(repo, "log", "--format=%H", f"imm/{slug}").split()


def head_of(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def json_file(repo: Path, rev: str, path: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(git(repo, "show", f"{rev}:{path}"))
    return loaded


__all__ = ["GitRepo"]
