"""Every command a report prints runs as printed (issue 41 #3): the report of a batch in each
state it can reach is rendered by the real `imm status` (and `imm run`), and each printed
command is pasted into a shell — on a copy of the repository, one command at a time — where
it must neither fail on usage nor do something other than its line says."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from imm_action.integrate import transitions as t
from imm_action.integrate.reasons import HEAD_CHECK_FAILED, LINEAGE_BROKEN
from imm_action.integrate.store import StateStore
from imm_action.integrate.verdict import build_report, verdict
from imm_action.model.state import BatchRunState
from tests.batch_helpers import current, file_check, make_project, open_local
from tests.conftest import git
from tests.integration.test_local_run import EXECUTOR

pytestmark = pytest.mark.slow

TASKS = {"a": [], "b": ["a"], "c": []}
BIN = str(Path(sys.executable).parent)  # where the installed `imm` lies


def _shell_env(behaviour: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "IMM_TEST_BEHAVIOUR": str(behaviour),
    }


def _imm(repo: Path, behaviour: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["imm", *argv, "--repo", str(repo)], env=_shell_env(behaviour), capture_output=True,
        text=True, timeout=180, check=False, cwd=repo.parent,
    )  # fmt: skip


def _printed_commands(text: str) -> list[str]:
    """The indented lines whose first word is the program (as the person invoked it)."""
    return [
        line.strip()
        for line in text.splitlines()
        if line.startswith("  ") and line.split()[0].rsplit("/", 1)[-1] == "imm"
    ]


def _paste(line: str, behaviour: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], env=_shell_env(behaviour), capture_output=True, text=True,
        timeout=180, check=False, cwd=cwd,
    )  # fmt: skip


def _state_of(repo: Path) -> tuple[str, str]:
    state = current(repo).state
    return state.batch_id, str(state.batch_state)


# -- the states ------------------------------------------------------------------------------
def _completed(repo: Path, behaviour: Path) -> None:
    assert _imm(repo, behaviour, "run", "init", "--executor", EXECUTOR).returncode == 0


def _parked(repo: Path, behaviour: Path) -> None:
    behaviour.write_text(json.dumps({"b": "always_wrong"}))
    assert _imm(repo, behaviour, "run", "init", "--executor", EXECUTOR).returncode == 1
    behaviour.write_text("{}")  # the person's fix


def _plan_changed(repo: Path, behaviour: Path) -> None:
    _parked(repo, behaviour)
    path = repo / "docs/plans/b.intent.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "revision": 2, "goal": "b, better"}, indent=2) + "\n")
    git(repo, "commit", "-qam", "b's intent, improved")


def _budget_stopped(repo: Path, behaviour: Path) -> None:
    run = _imm(repo, behaviour, "run", "init", "--executor", EXECUTOR, "--max-children", "1")
    assert run.returncode == 1, run.stderr


def _cancelled(repo: Path, behaviour: Path) -> None:
    _parked(repo, behaviour)
    assert _imm(repo, behaviour, "cancel", "init").returncode == 0


def _running(repo: Path, behaviour: Path) -> subprocess.Popen[str]:
    """`imm run` in a session of its own, once a lane is at work (a's sleeps a minute)."""
    behaviour.write_text(json.dumps({"a": "sleep:60"}))
    process = subprocess.Popen(
        ["imm", "run", "init", "--repo", str(repo), "--executor", EXECUTOR],
        env=_shell_env(behaviour), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:  # however loaded the machine
        if " started (log: " in line:
            break
    return process


def _interrupted(repo: Path, behaviour: Path) -> None:
    process = _running(repo, behaviour)
    _ctrl_c(process)
    assert process.returncode == 130
    behaviour.write_text("{}")


def _ctrl_c(process: subprocess.Popen[str]) -> None:
    """What a terminal's Ctrl-C does (the whole group); a run still there a minute later is
    killed, so that a failing test leaves no process behind."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise


def _decided(repo: Path, decide: Callable[[BatchRunState], BatchRunState]) -> None:
    """A state a pass decides on a rare path, written through the real store as a pass
    writes it: the parked batch after `decide` (a transition of integrate/transitions.py)."""
    stored = current(repo)
    state = decide(stored.state)
    store = StateStore(open_local(repo).refs)
    report = build_report(state, verdict(state, []), state.updated_at)
    store.write(stored, state, report, stored.cache)


def _lineage_failed(repo: Path, behaviour: Path) -> None:
    _parked(repo, behaviour)
    _decided(repo, lambda s: t.fail_lineage(s, f"{LINEAGE_BROKEN}: imm/init was rewritten"))


def _head_check_failed(repo: Path, behaviour: Path) -> None:
    _parked(repo, behaviour)
    reason = f"{HEAD_CHECK_FAILED}: a's check failed twice on the head itself"
    _decided(repo, lambda s: t.head_check_failed(s, reason))


def _retried_with_no_process(repo: Path, behaviour: Path) -> None:
    _parked(repo, behaviour)
    assert _imm(repo, behaviour, "retry", "init", "b").returncode == 0


STATES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "completed": (_completed, "completed"),
    "needs_human, parked": (_parked, "needs_human"),
    "needs_human, plan changed": (_plan_changed, "needs_human"),
    "needs_human, head check failed": (_head_check_failed, "needs_human"),
    "failed, lineage broken": (_lineage_failed, "failed"),
    "budget_stopped": (_budget_stopped, "budget_stopped"),
    "cancelled": (_cancelled, "cancelled"),
    "interrupted": (_interrupted, "running"),
    "running, no process": (_retried_with_no_process, "running"),
}


def _does_what_it_says(line: str, before: tuple[str, str], repo: Path) -> None:
    """`imm run` moves the batch on (to the end here: every executor behaves now); `--fresh`
    starts a new batch from the base; `imm retry <task>` sends the task back."""
    argv = shlex.split(line)
    batch_id, state = _state_of(repo)
    if argv[1] == "run":
        assert state == "completed", line
        if "--fresh" in argv:
            assert batch_id != before[0], line
            assert current(repo).state.continues is None, line
    elif argv[1] == "retry":
        task = argv[3]
        child = {c.task_id: c for c in current(repo).state.children}[task]
        assert str(child.state) in ("pending", "lane_admitted", "integrated"), line


@pytest.mark.parametrize("name", sorted(STATES))
def test_every_command_a_report_prints_runs_as_printed(tmp_path: Path, name: str) -> None:
    make_state, expected = STATES[name]
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    repo = make_project(tmp_path / "r", TASKS, checks={"b": file_check("b.txt", "b")})
    make_state(repo, behaviour)
    assert _state_of(repo)[1] == expected
    status = _imm(repo, behaviour, "status", "init")
    assert status.returncode == 0, status.stderr
    commands = _printed_commands(status.stdout)
    assert commands, status.stdout  # no process works on any of these: it says what runs it
    for number, line in enumerate(commands):
        copy = tmp_path / f"copy-{number}"
        shutil.copytree(repo, copy, symlinks=True)
        pasted = line.replace(shlex.quote(str(repo)), shlex.quote(str(copy)))
        assert pasted != line or str(repo) not in line
        before = _state_of(copy)
        done = _paste(pasted, behaviour, tmp_path)
        assert done.returncode in (0, 1), f"{line}\n{done.stderr}"
        for refusal in ("no executor", "usage:", "unexpected error", "batch_parallel_mismatch"):
            assert refusal not in done.stderr, f"{line}\n{done.stderr}"
        _does_what_it_says(pasted, before, copy)


def test_a_batch_a_live_run_works_on_says_to_wait_and_prints_no_command(tmp_path: Path) -> None:
    behaviour = tmp_path / "behaviour.json"
    repo = make_project(tmp_path / "r", TASKS)
    process = _running(repo, behaviour)
    try:
        status = _imm(repo, behaviour, "status", "init")
    finally:
        _ctrl_c(process)
    assert "next: wait for the running lanes" in status.stdout
    assert _printed_commands(status.stdout) == []
    after = _imm(repo, behaviour, "status", "init")  # the run ended: it says to resume
    assert "no process is at work on it" in after.stdout
    assert len(_printed_commands(after.stdout)) == 1
