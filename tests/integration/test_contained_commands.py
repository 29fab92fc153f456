"""Waiting on a contained command (sandbox/contain.py): its exit code once it ends, None once
its time is up, and nothing of it left behind either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from imm_action.sandbox.contain import end, start_contained, wait_contained


def _started(tmp_path: Path, code: str) -> subprocess.Popen[bytes]:
    return start_contained(
        [sys.executable, "-c", code], cwd=tmp_path, env={}, stdout=subprocess.DEVNULL
    )


def test_waiting_gives_the_exit_code_of_a_command_that_ended(tmp_path: Path) -> None:
    process = _started(tmp_path, "import sys; sys.exit(7)")
    assert wait_contained(process, 30) == 7
    assert end(process) == 7


def test_waiting_gives_none_when_the_time_is_up_and_end_stops_the_command(
    tmp_path: Path,
) -> None:
    process = _started(tmp_path, "import time; time.sleep(30)")
    assert wait_contained(process, 0.2) is None
    assert process.poll() is None  # still running: only `end` stops it
    assert end(process) == 143  # stopped by the reaper (128 + SIGTERM)


def test_waiting_on_a_command_that_already_ended_returns_at_once(tmp_path: Path) -> None:
    process = _started(tmp_path, "pass")
    process.wait()
    assert wait_contained(process, 30) == 0
