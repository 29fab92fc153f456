"""Earlier sessions' temporary folders go after the session, not in its time (ADR 0065): the
folders pytest itself would delete at the session's end, and only those."""

from __future__ import annotations

import time
from pathlib import Path

from tests.stale_basetemps import LOCK, STALE_PREFIX, delete_in_background, doomed


def _sessions(root: Path, *numbers: int) -> None:
    for number in numbers:
        (root / f"pytest-{number}" / "popen-gw0" / "t0").mkdir(parents=True)
        (root / f"pytest-{number}" / "popen-gw0" / "t0" / "f").write_text("x")


def test_all_but_the_newest_three_go_when_pytest_keeps_three(tmp_path: Path) -> None:
    _sessions(tmp_path, 4, 5, 6, 7, 8)
    (tmp_path / "pytest-current").symlink_to(tmp_path / "pytest-8")
    assert doomed(tmp_path, 3) == [tmp_path / "pytest-4", tmp_path / "pytest-5"]


def test_a_folder_whose_session_holds_its_lock_stays(tmp_path: Path) -> None:
    _sessions(tmp_path, 1, 2, 3, 4, 5)
    (tmp_path / "pytest-1" / LOCK).write_text("")
    assert doomed(tmp_path, 3) == [tmp_path / "pytest-2"]


def test_nothing_goes_while_no_more_than_three_are_kept(tmp_path: Path) -> None:
    _sessions(tmp_path, 0, 1, 2)
    assert doomed(tmp_path, 3) == []


def test_the_deleter_removes_them_and_what_an_earlier_one_left(tmp_path: Path) -> None:
    _sessions(tmp_path, 0, 1, 2, 3, 4)
    (tmp_path / f"{STALE_PREFIX}left").mkdir()
    given = delete_in_background(tmp_path, 3)
    assert len(given) == 3  # pytest-0, pytest-1 moved aside, and the one left before
    deadline = time.monotonic() + 30
    while any(path.exists() for path in given) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pytest-2", "pytest-3", "pytest-4"]
