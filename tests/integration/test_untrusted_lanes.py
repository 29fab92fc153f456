"""Lanes are untrusted (issue 12): whatever an executor does outside its own change never reaches
the user's repository or what lands. Every attack here is really executed, by a real executor
process in a real lane, against real git."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import git
from tests.integration.test_local_run import imm_run_argv
from tests.isolation_probe import running_with

HOSTILE = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "hostile_executor.py")]
)


def _refs(repo: Path) -> dict[str, str]:
    """The user's own refs: everything but imm's batch, lane and outcome refs."""
    listing = git(repo, "for-each-ref", "--format=%(objectname) %(refname)")
    refs = dict(reversed(line.split(" ", 1)) for line in listing.splitlines())
    refs["HEAD"] = git(repo, "symbolic-ref", "HEAD").strip()
    return {
        name: oid
        for name, oid in refs.items()
        if not name.startswith(("refs/imm/", "refs/heads/imm/", "refs/heads/imm-lane/"))
    }


def _running_with_variable(entry: bytes) -> list[str]:
    """Live processes whose environment holds `entry` (NAME=value)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and entry in (proc / "environ").read_bytes().split(b"\0"):
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(proc.name)
        except OSError:
            continue
    return found


@pytest.fixture
def attacked(tmp_path: Path) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """A batch of `good`, `evil` and `later` (after `good`), run with the hostile executor."""
    repo = make_project(tmp_path / "r", {"good": [], "evil": [], "later": ["good"]})
    out = tmp_path / "out"
    out.mkdir()
    config_before = (repo / ".git/config").read_bytes()
    refs_before = _refs(repo)
    argv = [*imm_run_argv(repo)[:-1], HOSTILE]
    env = {**os.environ, "IMM_TEST_DIR": str(out)}
    done = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=120)
    assert (repo / ".git/config").read_bytes() == config_before
    assert _refs(repo) == refs_before
    return repo, out, done


def test_an_executor_attacking_from_its_lane_lands_nothing_and_touches_nothing_of_the_user(
    attacked: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    repo, _, done = attacked
    assert done.returncode == 1, done.stderr  # the evil lane needs a person
    landed = git(repo, "ls-tree", "-r", "--name-only", "imm/init").split()
    assert "EVIL.txt" not in landed
    assert {"good.txt", "later.txt"} <= set(landed)
    children = {c.task_id: (str(c.state), c.reason) for c in current(repo).state.children}
    assert children["good"] == ("integrated", None)
    assert children["later"] == ("integrated", None)
    assert children["evil"] == ("needs_human", "dirty_outside_scope: EVIL.txt")
    assert "dirty_outside_scope: EVIL.txt" in done.stdout


def test_an_fsmonitor_or_hook_set_by_an_executor_never_runs(
    attacked: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, out, _ = attacked
    assert (out / "fsmonitor.sh").exists()  # the attack happened
    assert not (out / "fsmonitor-ran").exists()


def test_a_setsid_grandchild_of_an_executor_is_gone_when_imm_run_returns(
    attacked: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, out, _ = attacked
    assert (out / "grandchild.pid").read_text()  # it started
    assert running_with(f"left-by-{out}".encode()) == []


@pytest.mark.slow
def test_sigterm_ends_imm_run_with_143_its_executors_and_lane_repositories_and_a_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    tasks = {"a": [], "b": [], "c": ["a"], "d": ["b"]}
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps(dict.fromkeys(tasks, "sleep:20")))
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    monkeypatch.setenv("IMM_TEST_PIDS", str(pids))
    repo = make_project(tmp_path / "r", tasks)
    process = subprocess.Popen(
        imm_run_argv(repo), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(pids.iterdir())) < 2:
        time.sleep(0.05)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)  # the coordinator alone, as `kill <pid>` does
    _, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert time.monotonic() - started < 10
    assert len(list(pids.iterdir())) == 2  # two executors started
    # found by their environment: a pid in the sandbox's PID namespace means nothing here
    assert _running_with_variable(f"IMM_TEST_PIDS={pids}".encode()) == []
    assert not list((repo / ".git/imm/trees").glob("slot-*/tree/.git"))  # no lane repository
    behaviour.write_text(json.dumps({}))
    rerun = subprocess.run(
        imm_run_argv(repo), check=False, capture_output=True, text=True, timeout=120
    )
    assert rerun.returncode == 0, rerun.stderr
    subjects = git(repo, "log", "--format=%s", "imm/init").splitlines()
    for task in tasks:
        assert sum(s.startswith(f"imm({task}):") for s in subjects) == 1


LEAKY = shlex.join(
    [
        sys.executable,
        "-c",
        "import os, pathlib; key = os.environ.get('ANTHROPIC_API_KEY');"
        "print('my key is', key, 'and the token', os.environ.get('GITHUB_TOKEN'));"
        "pathlib.Path(os.environ['IMM_TASK_ID'] + '.txt').write_text(f'{key}\\n')",
    ]
)
KEY = "sk-ant-api03-test-0123456789"


def test_a_provider_key_reaches_the_executor_but_is_masked_in_its_log_and_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import descriptor

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_never_for_executors")
    # the check prints what the executor wrote (the key) and fails
    check = descriptor(["-c", "import sys; print('found', open('a.txt').read()); sys.exit(1)"])
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": check})
    done = subprocess.run(
        [*imm_run_argv(repo)[:-1], LEAKY], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    logs = "".join(path.read_text() for path in (repo / ".git/imm/logs").iterdir())
    assert "my key is *** and the token None" in logs
    assert KEY not in logs
    everything = git(repo, "log", "-p", "--all", "--format=%B")  # outcomes, state, checks
    assert "found ***" in everything
    assert KEY not in everything


@pytest.mark.slow
def test_24_independent_tasks_at_max_parallel_12_lose_no_lane_in_three_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import descriptor, run_cli

    tasks: dict[str, list[str]] = {f"t{n:02d}": [] for n in range(24)}
    quick = shlex.join(["sh", "-c", 'echo "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"'])
    for run in range(3):
        repo = make_project(
            tmp_path / f"r{run}",
            tasks,
            checks=dict.fromkeys(tasks, descriptor(["-c", "pass"], executable="true")),
        )
        code, out, err = run_cli(
            capsys, "run", "init", "--repo", str(repo), "--executor", quick, "--max-parallel", "12"
        )
        assert code == 0, (out, err)
        children = current(repo).state.children
        assert [(c.state, c.attempts) for c in children] == [("integrated", 0)] * 24
        assert not list((repo / ".git/imm/trees").glob("slot-*/tree/.git"))
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ('ln -s /etc/passwd "$IMM_TASK_ID.txt"', "lane_symlink_outside: a.txt"),
        (
            "mkdir a.txt && cd a.txt && git init -q && git -c user.name=x -c user.email=x@y "
            "commit -q --allow-empty -m x",
            "lane_gitlink: a.txt",
        ),
    ],
)
def test_a_lane_refuses_links_out_of_the_repository_and_gitlinks_inside_its_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, reason: str
) -> None:
    from tests.conftest import run_cli

    repo = make_project(tmp_path / "r", {"a": []})
    executor = shlex.join(["sh", "-c", script])
    code, _, _ = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    assert code == 1
    assert [(c.state, c.reason) for c in current(repo).state.children] == [("needs_human", reason)]


def test_imm_never_runs_an_fsmonitor_or_hooks_named_in_the_repository_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conftest import run_cli

    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    marker = tmp_path / "ran"
    program = tmp_path / "program.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho /\n")
    program.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-checkout", "reference-transaction", "post-index-change"):
        (hooks / hook).symlink_to(program)
    git(repo, "config", "core.fsmonitor", str(program))
    git(repo, "config", "core.hooksPath", str(hooks))
    (repo / "docs/plans/a.intent.json").touch()  # something for `status` to look at
    executor = shlex.join(["sh", "-c", 'echo "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"'])
    for argv in (["check"], ["plan", "init"], ["run", "init", "--executor", executor]):
        code, _, err = run_cli(capsys, *argv, "--repo", str(repo))
        assert code == 0, err
    assert current(repo).state.batch_state == "completed"
    assert not marker.exists()
