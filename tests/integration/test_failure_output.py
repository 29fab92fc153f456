"""Why a task stopped is shown where people look (SPEC §5.7): the failed command, how it ended
and the last lines of its output — in the lane log, the live view, `imm status` and the status
comment — with real executors, real descriptors and real git."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from imm_action.carriers.source import Initiatives, NoIssueSource
from imm_action.commands import run as run_command
from imm_action.console import CommandIO
from imm_action.github.reporting import status_comment
from imm_action.ports import Ports
from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, run_cli
from tests.integration.test_local_run import EXECUTOR

MARKER = "MARKER-7f3a9c"
FAILING_CHECK = descriptor(["-c", f"print('checking'); print('{MARKER}'); raise SystemExit(1)"])


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so `imm run` draws its live view on it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def set_behaviour(**behaviours: str) -> None:
        path = tmp_path / "behaviour.json"
        path.write_text(json.dumps(behaviours))
        monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))

    set_behaviour()
    return set_behaviour


def _run_live(repo: Path) -> tuple[int, str, str]:
    out, screen = io.StringIO(), Terminal()
    args = run_command.RunArgs("init", repo, None, EXECUTOR, None, False, dict(os.environ))
    ports = Ports(CommandIO(out, screen), Initiatives(repo, NoIssueSource()))
    code = run_command.run(args, ports)
    return code, out.getvalue(), screen.getvalue()


def test_a_failing_descriptors_output_shows_in_status_lane_log_live_view_and_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behave: object
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]}, checks={"a": FAILING_CHECK})
    code, summary, screen = _run_live(repo)
    assert code == 1
    # The live view redraws by erasing lines: its final screen is what follows the last erase.
    final_screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.rsplit("\x1b[2K", 1)[-1])
    assert "task a needs a person: QA failure limit reached" in final_screen
    assert MARKER in final_screen.split("task a needs a person")[-1]
    assert MARKER in summary
    _, text, _ = run_cli(capsys, "status", "--repo", str(repo))
    assert f"| {MARKER}" in text
    assert "a:ok: `python3 -c" in text
    assert "exited with 1" in text
    _, markdown, _ = run_cli(capsys, "status", "--repo", str(repo), "--format", "markdown")
    assert MARKER in markdown.split("<details>")[1]
    stored = current(repo)
    child = stored.state.children[0]
    assert child.lane is not None
    assert MARKER in Path(child.lane.runner.path).read_text()  # type: ignore[union-attr]
    assert stored.report is not None
    comment = status_comment(stored.report, stored.state, "https://github.example/acme/w")
    details = comment.split("<details>")[1].split("</details>")[0]
    assert MARKER in details
    assert "/imm retry a" in comment


def test_a_descriptor_past_its_timeout_reads_timed_out_after_n_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behave: object
) -> None:
    sleepy = descriptor(["-c", "import time; time.sleep(30)"], timeout_ms=500)
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": sleepy})
    assert run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)[0] == 1
    _, text, _ = run_cli(capsys, "status", "--repo", str(repo))
    assert "timed out after 0.5 s" in text
    # A timeout is not shown as the shell's exit status 124 (the batch id may hold "124").
    assert "exited with 124" not in text
    assert "exit 124" not in text


def test_an_executor_failure_shows_its_command_exit_status_and_output_with_secrets_masked(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-live-0123456789")
    # mapped in: the executor environment is an allowlist (README "What an executor sees")
    config = {".github/imm.yml": "executor_env: [MY_API_KEY]\n", "config.txt": "mode=ok\n"}
    repo = make_project(tmp_path / "r", {"a": []}, extra_files=config)
    behave(a="leak")
    assert run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)[0] == 1
    _, text, _ = run_cli(capsys, "status", "--repo", str(repo))
    assert "executor: `" in text
    assert "lane_executor.py` exited with 2" in text
    assert "| connecting with key ***" in text
    child = current(repo).state.children[0]
    assert child.lane is not None
    log = Path(child.lane.runner.path).read_text()  # type: ignore[union-attr]
    assert "sk-live-0123456789" not in log + text
    assert "connecting with key ***" in log


def test_the_executor_gets_the_same_failure_text_on_its_retry(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    monkeypatch.setenv("IMM_TEST_PROMPTS", str(prompts))
    repo = make_project(tmp_path / "r", {"a": []})
    behave(a="fail_once")
    assert run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)[0] == 0
    retry_prompt = (prompts / "a.2.md").read_text()
    log = Path(current(repo).state.children[0].lane.runner.path).read_text()  # type: ignore[union-attr]
    shown = log.split("imm: check a:ok: FAILED\n")[1].split("imm: executor")[0]
    assert shown.replace("imm:   ", "").strip() in retry_prompt
    assert "exited with 1" in retry_prompt
