"""What a repository's size costs a batch (issue 13, SPEC §9).

The same 8-task initiative (the DAG of batch_scaling.py: chains of three and independent tasks,
executors sleeping 0.2 s, trivial checks) runs with `imm run` on a repository of 100 files and
on one of 100,000 files (1,000 folders of 100), in one run. Prints both walls and the extra
seconds per task the big repository costs (the goal: <= 1 s). The small repository is the
baseline measured in the same run.

    python benchmarks/big_repo.py [--files 100,100000] [--tasks 8] [--lanes 4]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_scaling import (
    EXECUTOR_SCRIPT,
    busy_seconds,
    calibrate,
    git,
    make_dag,
    write_project,
)


def add_filler(root: Path, files: int) -> None:
    """`files` small files in folders of 100, committed on top of the project."""
    per_folder = 100
    for index in range(files):
        folder = root / "src" / f"d{index // per_folder:04d}"
        if index % per_folder == 0:
            folder.mkdir(parents=True)
        (folder / f"f{index % per_folder:03d}.txt").write_text(f"file {index}\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"{files} files")


def run_one(files: int, tasks: int, lanes: int, seconds: float) -> tuple[float, float]:
    graph = make_dag(tasks)
    scratch = Path(tempfile.mkdtemp(prefix="imm-bigrepo-"))
    try:
        repo = scratch / "repo"
        repo.mkdir()
        write_project(repo, graph, lanes)
        add_filler(repo, files)
        times = scratch / "times.txt"
        times.touch()
        env = {**os.environ, "BENCH_SECONDS": str(seconds), "BENCH_TIMES": str(times)}
        executor = shlex.join(["sh", "-c", EXECUTOR_SCRIPT])
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "bench", "--repo", str(repo),
             "--max-parallel", str(lanes), "--executor", executor],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
        return wall, busy_seconds(times)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100,100000")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.2)
    args = parser.parse_args()
    sizes = [int(n) for n in args.files.split(",")]
    print(f"big repo: {args.tasks} tasks, {args.lanes} lanes, executors sleeping {args.seconds} s")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"calibration: 100 git processes in {calibrate():.2f} s")
    print(f"{'files':>7} {'wall':>8} {'per task':>9} {'extra/task':>10} {'ratio':>6} {'load':>5}")
    baseline: float | None = None
    for files in sizes:
        wall, _busy = run_one(files, args.tasks, args.lanes, args.seconds)
        baseline = wall if baseline is None else baseline
        extra = (wall - baseline) / args.tasks
        print(
            f"{files:>7} {wall:7.1f}s {wall / args.tasks:8.2f}s {extra:9.2f}s "
            f"{wall / baseline:6.2f} {os.getloadavg()[0]:5.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
