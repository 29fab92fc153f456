"""A real npm package's suite as every task's check (issue 29, ADR 0048).

minimist 1.2.8 with its own tape suite (tests/npm_package.py): seven tasks, each judged by one
of its test files under tape, three lanes, `check_setup: npm ci`. Each run makes a fresh
repository, so its first batch installs from nothing (imm's own package cache starts empty),
then runs a second batch of the same repository (`--fresh`), which reuses what setup prepared.

Printed per run, from imm's own log: the wall, `check_setup`'s time, the lanes' times, and the
batch's critical path — setup, then the longest of (the longest lane, the lanes' total over the
lane count), then the last integration after the last lane ended: no schedule on three lanes
can beat it. The goal: wall <= 1.5x the critical path; one install in the first batch, none in
the second.

    python benchmarks/npm_project.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests import npm_package  # noqa: E402
from tests.conftest import GIT_ENV, TEST_EXECUTOR_ENV  # noqa: E402

LANES = 3
_STAMPED = re.compile(r"^imm \[\s*([\d.]+)s\]: (.*)$")


def make_repo(root: Path, files: dict[str, str]) -> Path:
    from tests.batch_helpers import make_project

    extra = {**files, ".github/imm.yml": npm_package.config(LANES), ".gitignore": "node_modules/\n"}
    return make_project(root / "r", npm_package.tasks(), checks=npm_package.checks(),
                        scopes=npm_package.scopes(), extra_files=extra)  # fmt: skip


def imm_run(repo: Path, *extra: str) -> tuple[float, str]:
    env = {**os.environ, **GIT_ENV, "IMM_EXECUTOR_ENV": TEST_EXECUTOR_ENV}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo), "--executor",
         npm_package.EXECUTOR, *extra], capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - started
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"imm run failed ({done.returncode}):\n{output[-4000:]}")
    return wall, output


def critical_path(output: str) -> dict[str, float]:
    """Setup, lanes and the last integration, read from imm's stamped log lines."""
    started: dict[str, float] = {}
    lanes: list[float] = []
    last_end = last_integrated = setup = 0.0
    for line in output.splitlines():
        stamped = _STAMPED.match(line)
        if stamped is None:
            continue
        at, what = float(stamped.group(1)), stamped.group(2)
        if (found := re.match(r"check_setup passed in ([\d.]+) s", what)) is not None:
            setup = float(found.group(1))
        elif (found := re.match(r"lane (\S+) started", what)) is not None:
            started[found.group(1)] = at
        elif (found := re.match(r"lane (\S+) ended", what)) is not None:
            lanes.append(at - started[found.group(1)])
            last_end = max(last_end, at)
        elif what.startswith("integrated "):
            last_integrated = max(last_integrated, at)
    lane_bound = max(*lanes, sum(lanes) / LANES)
    tail = max(0.0, last_integrated - last_end)
    return {"setup": setup, "lane_bound": lane_bound, "tail": tail,
            "critical": setup + lane_bound + tail, "lanes": float(len(lanes))}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not npm_package.npm_available():
        raise SystemExit("needs node and npm")
    print(f"npm project: {npm_package.PACKAGE}, {len(npm_package.TEST_FILES)} tasks, "
          f"{LANES} lanes, check_setup: {npm_package.SETUP}")  # fmt: skip
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    ratios, strict, walls, criticals, seconds = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="imm-npm-") as scratch:
        files = npm_package.package_files(Path(scratch) / "cache")
        for run in range(args.runs):
            repo = make_repo(Path(scratch) / f"run{run}", files)
            wall, output = imm_run(repo)
            path = critical_path(output)
            installs = output.count("check_setup passed")
            second_wall, second = imm_run(repo, "--fresh")
            again = second.count("check_setup passed")
            ratios.append(wall / path["critical"])
            # stricter: setup and lanes only, as if the last integration cost nothing
            strict.append(wall / (path["setup"] + path["lane_bound"]))
            walls.append(wall)
            criticals.append(path["critical"])
            seconds.append(second_wall)
            print(f"run {run + 1}: wall {wall:.1f} s, critical path {path['critical']:.1f} s "
                  f"(setup {path['setup']:.1f} + lanes {path['lane_bound']:.1f} + last "
                  f"integration {path['tail']:.1f}), ratio {wall / path['critical']:.2f}; "
                  f"installs: {installs} first batch, {again} second batch "
                  f"({second_wall:.1f} s)")  # fmt: skip
    print(f"median: wall {statistics.median(walls):.1f} s, critical path "
          f"{statistics.median(criticals):.1f} s, ratio {statistics.median(ratios):.2f} "
          f"(goal <= 1.5); without the last integration in the path "
          f"{statistics.median(strict):.2f}; second batch "
          f"{statistics.median(seconds):.1f} s")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
