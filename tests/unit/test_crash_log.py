"""A crash's traceback is written to a file imm makes itself (issue 29 #5): a link planted at
its name in a shared temp folder is never followed."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from imm_action.exits import write_crash_log


def test_a_crash_log_is_made_afresh_and_readable_by_its_owner_only(tmp_path: Path) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log = write_crash_log("run", tmp_path)
    assert "RuntimeError: boom" in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600


def test_a_link_planted_at_the_crash_logs_name_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    now = datetime.now(UTC)
    for moment in (now, now + timedelta(seconds=1), now + timedelta(seconds=2)):
        stamp = moment.strftime("%Y%m%dT%H%M%SZ")
        (tmp_path / f"imm-run-{stamp}-{os.getpid()}.log").symlink_to(victim)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        with pytest.raises((FileExistsError, OSError), match="imm-run-"):
            write_crash_log("run", tmp_path)
    assert victim.read_text() == "precious\n"
