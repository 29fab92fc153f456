"""Shared fixtures: real git repositories with pinned identities and no user config."""

from __future__ import annotations

import compileall
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import imm_action
from tests.git_http_remote import GitHttpRemote
from tests.stale_basetemps import delete_in_background, sessions_root

# Property tests check behaviour, not speed (speed lives in benchmarks/): on a loaded 2-core
# machine hypothesis's own time limits (a deadline per example, "input generation is slow")
# failed tests that had found nothing wrong.
settings.register_profile(
    "imm",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
settings.load_profile("imm")


def pytest_configure(config: pytest.Config) -> None:
    """Compile imm's and the tests' bytecode once, in the process that starts the workers.

    The suite starts some 500 Python processes that import imm from this work tree, which an
    editable install never compiles; where PYTHONDONTWRITEBYTECODE is set (this machine, CI
    images) each compiled all of it anew: 165 ms of CPU a process (ADR 0064)."""
    if hasattr(config, "workerinput"):
        return
    for folder in (Path(imm_action.__file__).parent, Path(__file__).parent):
        compileall.compile_dir(folder, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before pytest's own deletion, which then finds nothing
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Earlier sessions' temporary folders are deleted after the session, not in its time (ADR
    0065), by the process that started the workers."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.basetemp is not None:
        return
    if config.getini("tmp_path_retention_policy") != "none":
        delete_in_background(sessions_root(), int(config.getini("tmp_path_retention_count")))


GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    # fixed dates make the same history produce the same commit ids in every repository
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


# A suite started in the background of a script (`.ci/run &`) inherits SIGINT ignored, and so
# would every `imm run` it starts: the tests of what a person's Ctrl-C does need it delivered.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# `python3` in a test executor, a check or a stand-in is the interpreter running the tests, as
# in an activated virtual environment, never a version manager's shim (pyenv's runs about 80 ms
# of bash before Python starts, 28 % of the busy CPU of an integration file: docs/decisions/0064)
INTERPRETER_FIRST = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


# What the test executors read (tests/lane_executor.py and the others): passed to them the way
# an operator passes a variable (`IMM_EXECUTOR_ENV`), since the IMM_ prefix no longer passes
TEST_EXECUTOR_ENV = (
    "IMM_TEST_BEHAVIOUR,IMM_TEST_DIR,IMM_TEST_FIX,IMM_TEST_INDEX_ATTACK,IMM_TEST_PIDS,"
    "IMM_TEST_PROMPTS,IMM_TEST_TIMELINE,IMM_TEST_WRITES"
)


@pytest.fixture(autouse=True)
def pinned_git(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", INTERPRETER_FIRST)
    monkeypatch.setenv("IMM_EXECUTOR_ENV", TEST_EXECUTOR_ENV)
    # the tests' folders, where test executors and checks leave evidence: the operator's
    # writable folders of the sandbox (confine.py); everything else stays read-only to them
    monkeypatch.setenv("IMM_SANDBOX_WRITABLE", str(tmp_path_factory.getbasetemp()))


@pytest.fixture
def open_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder lane code in the sandbox may write (it lies in the operator's writable
    folders): where test executors and checks leave their evidence."""
    folder = tmp_path_factory.mktemp("open")
    folder.chmod(0o777)
    return folder


@pytest.fixture(autouse=True)
def rest_calls_are_documented() -> Iterator[None]:
    """Every REST call a test makes to a fake GitHub is an operation of GitHub's OpenAPI
    description, with documented query parameters and a JSON body that fits it."""
    from tests.fake_github.server import SERVED_REQUESTS

    SERVED_REQUESTS.clear()
    yield
    # /_blobs/: GitHub's storage, where an artifact download redirects to, not the REST API
    calls = [
        c for c in SERVED_REQUESTS if c.path != "/graphql" and not c.path.startswith("/_blobs/")
    ]
    SERVED_REQUESTS.clear()
    if not calls:
        return
    from tests.fakes.github_openapi import request_problems

    problems = sorted(
        {problem for c in calls for problem in request_problems(c.method, c.path, c.query, c.body)}
    )
    assert not problems, "undocumented GitHub calls:\n" + "\n".join(problems)


@pytest.fixture
def git_http_remote(tmp_path: Path) -> Iterator[GitHttpRemote]:
    """A smart-HTTP git host on 127.0.0.1 wanting the token `s3cret` (see git_http_remote.py)."""
    with GitHttpRemote(tmp_path / "git-host", token="s3cret") as host:
        yield host


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`imm <argv>` in-process: (exit code, stdout, stderr)."""
    from imm_action.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def make_repo(root: Path, files: Mapping[str, str | bytes], *, commit: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, files)
    git(root, "add", "-A")
    if commit:
        git(root, "commit", "-q", "-m", "initial", "--allow-empty")
    return root


# A check that runs a package's tests with pytest (`python3` + these). hypothesis's pytest
# plugin, which this suite's interpreter has and those packages never use, is half of each
# run's 0.4 s start (issue 46): it stays off.
PYTEST_CHECK = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]


def descriptor(argv: list[str] | None = None, executable: str = "python3", **command: Any) -> str:
    body = {"executable": executable, "argv": argv or ["-c", "pass"], **command}
    return json.dumps({"contract": "assurance_kernel/verification_descriptor/v2", "command": body})


def intent(task_id: str, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "contract": "assurance_kernel/task_intent/v1",
        "task_id": task_id,
        "goal": f"Do {task_id}",
        "acceptance": [{"id": "ok", "assertion": "It works.", "verification": descriptor()}],
        "scope_hint": [f"src/{task_id}"],
        "risk": "routine",
        "revision": 1,
        "owner": "user",
    }
    data.update(overrides)
    return data


def initiative_markdown(tasks: Mapping[str, list[str]]) -> str:
    lines = ["# Initiative", ""]
    for task_id, needs in tasks.items():
        lines += [f"## s-{task_id}: slice {task_id}", "Tasks:", f"- {task_id}"]
        if needs:
            lines.append("Blocked by: " + ", ".join(needs))
        lines.append("")
    return "\n".join(lines)


def initiative_files(
    slug: str, tasks: Mapping[str, list[str]], intents: Mapping[str, dict[str, Any]] | None = None
) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"docs/initiatives/{slug}.md": initiative_markdown(tasks)}
    for task_id in tasks:
        data = (intents or {}).get(task_id, intent(task_id))
        files[f"docs/plans/{task_id}.intent.json"] = json.dumps(data, indent=2) + "\n"
    return files


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (including .git), to prove a command wrote nothing."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


GOLDEN = Path(__file__).resolve().parent / "golden"


def assert_golden(name: str, text: str) -> None:
    """User-visible text is part of the interface: it must match its golden file."""
    path = GOLDEN / name
    if os.environ.get("IMM_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {name}; create it with IMM_UPDATE_GOLDEN=1 pytest"
    assert path.read_text(encoding="utf-8") == text, (
        f"{name} changed; if the new wording is intended, run: IMM_UPDATE_GOLDEN=1 pytest"
    )


def step_outputs(path: Path) -> dict[str, str]:
    """GitHub's output file (`name<<delimiter`, the value, the delimiter), as a mapping."""
    lines = path.read_text().splitlines()
    return {line.split("<<")[0]: lines[at + 1] for at, line in enumerate(lines) if "<<" in line}


def as_github_step(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    """This process as a GitHub Actions step (outputs and summary in `folder`, no run of its
    own): the step summary's path."""
    summary = folder / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(folder / "outputs"))
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)
    return summary
