"""What `imm run` says integration cost is what it cost (issue 30 #1): each stack line gives the
checks run and those carried over, and the run's closing lines give the batch's totals. The
checks count their own runs in a file, as a user's CI bill would."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import make_project
from tests.conftest import descriptor, run_cli

EXECUTOR = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "lane_executor.py")]
)


def _counting_check(task: str, counter: Path) -> str:
    return descriptor(
        ["-c", f"import pathlib, sys; open({str(counter)!r}, 'a').write('run\\n'); "
         f"sys.exit(0 if pathlib.Path('{task}.txt').exists() else 1)"]
    )  # fmt: skip


def test_imm_run_counts_the_checks_its_background_worker_ran(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    counter = open_dir / "runs"  # integration checks may run as another user
    counter.touch()
    counter.chmod(0o666)
    tasks = {"a": [], "b": ["a"], "c": ["b"]}
    repo = make_project(
        tmp_path / "r", tasks, checks={t: _counting_check(t, counter) for t in tasks}
    )
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    lanes_ran = 3  # each lane checks its own task once
    integration_ran = len(counter.read_text().splitlines()) - lanes_ran
    stacks = re.findall(r"as one stack \([^)]*\): (\d+) check runs?(?:, (\d+) carried over)?", err)
    assert len(stacks) == 3
    assert sum(int(runs) for runs, _ in stacks) == integration_ran == 6  # a; a, b; a, b, c
    assert all(runs != "0" for runs, _ in stacks)
    assert f"integration: 3 stacks verified, {integration_ran} check runs, 0 carried over" in out
