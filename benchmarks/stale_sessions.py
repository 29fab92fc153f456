"""What earlier test sessions' folders cost a run of the suite (ADR 0065).

A private temp root (PYTEST_DEBUG_TEMPROOT) holds the folders of three earlier sessions, the
oldest with `--entries` files and folders (a whole-suite session leaves about 200,000). In a
scratch project of one trivial test, `pytest -n 4` runs once with no conftest — pytest deletes
the oldest folder when the session ends, in its time: the baseline — and once with a conftest
that calls `tests/stale_basetemps.py` as the suite's does (the deletion goes on after the
session). Printed per round: both sessions' wall time, and how long the detached deleter took
after the session ended; then the medians and their ratio. Each round makes its folders
afresh; the rounds alternate.

    python benchmarks/stale_sessions.py [--entries 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.stale_basetemps import delete_in_background, sessions_root

import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        kept = int(session.config.getini("tmp_path_retention_count"))
        delete_in_background(sessions_root(), kept)
"""


def earlier_sessions(temproot: Path, entries: int) -> Path:
    """Three sessions' folders under `temproot`, the oldest with `entries` entries."""
    root = temproot / f"pytest-of-{os.environ.get('USER') or 'root'}"
    for number in range(3):
        (root / f"pytest-{number}").mkdir(parents=True)
    oldest = root / "pytest-0" / "popen-gw0"
    for folder in range(entries // 10):
        place = oldest / f"t{folder // 1000}" / f"d{folder}"
        place.mkdir(parents=True)
        for name in range(9):
            (place / f"f{name}").write_bytes(b"x")
    subprocess.run(["sync"], check=True)
    return root


def session(project: Path, temproot: Path) -> float:
    environment = {**os.environ, "PYTEST_DEBUG_TEMPROOT": str(temproot)}
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "4", "-p", "no:cacheprovider", "test_one.py"],
        cwd=project, env=environment, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.monotonic() - started


def deleted_after(root: Path) -> float:
    """Seconds until no folder the deleter was given is left."""
    started = time.monotonic()
    while any(root.glob("imm-stale-*")):
        time.sleep(0.1)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    baseline: list[float] = []
    ours: list[float] = []
    print(f"earlier sessions: 3, the oldest with {args.entries:,} entries; load "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    for round_number in range(1, args.rounds + 1):
        for with_conftest in (False, True):
            scratch = Path(tempfile.mkdtemp(prefix="imm-stale-bench-"))
            try:
                project, temproot = scratch / "project", scratch / "tmp"
                project.mkdir()
                (project / "test_one.py").write_text("def test_one(tmp_path):\n    pass\n")
                if with_conftest:
                    (project / "conftest.py").write_text(CONFTEST)
                root = earlier_sessions(temproot, args.entries)
                wall = session(project, temproot)
                after = deleted_after(root)
                (ours if with_conftest else baseline).append(wall)
                label = "deleted after" if with_conftest else "pytest deletes"
                tail = f", deleter done {after:5.2f} s after it" if with_conftest else ""
                print(f"round {round_number}: {label}: session {wall:6.2f} s{tail}")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    print(f"median session: pytest deletes {statistics.median(baseline):.2f} s, deleted after "
          f"{statistics.median(ours):.2f} s: ratio "
          f"{statistics.median(ours) / statistics.median(baseline):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
