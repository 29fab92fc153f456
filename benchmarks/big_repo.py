"""What a repository's size costs a batch (issue 13, SPEC §9).

The same 8-task initiative (the DAG of batch_scaling.py: chains of three and independent tasks,
executors sleeping 0.2 s, trivial checks) runs with `imm run` on a repository of 100 files and
on one of 100,000 files (1,000 folders of 100), in one run. Prints both walls and the extra
seconds per task the big repository costs (the goal: <= 1 s). The small repository is the
baseline measured in the same run.

Each repository runs two batches of that initiative, one after the other (the second under
other task ids): the first, "cold", on a fresh repository; the second, "warm", finds what the
first left. Where the sandbox mounts overlays (decision 0055), every lane and check tree is an
overlay over one base checkout, which `imm run` keeps in memory and removes at its end: both
batches pay that one checkout. Elsewhere the trees are a pool of whole checkouts (decision
0028): the cold batch pays one per tree, the warm one moves them by what differs.

    python benchmarks/big_repo.py [--files 100,100000] [--tasks 8] [--lanes 4]
"""

from __future__ import annotations

import argparse
import json
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
    # packed, as a clone is: 100,000 loose objects would slow every git call down, and the
    # first `imm run` would spend its end packing them
    git(root, "repack", "-adq")
    # what setting up wrote (400 MB of small files) on disk before the clock starts: else the
    # kernel's writing it back competes with the batch measured, a cost of the setup's own
    os.sync()


def add_second_initiative(root: Path, graph: dict[str, list[str]]) -> None:
    """`again`: the same DAG under other task ids (`u…` for `t…`), for the warm batch."""
    renamed = {"u" + task[1:]: ["u" + need[1:] for need in needs] for task, needs in graph.items()}
    lines = ["# again", ""]
    for task, needs in renamed.items():
        lines += [f"## s-{task}: {task}", "Tasks:", f"- {task}"]
        lines += ["Blocked by: " + ", ".join(needs)] if needs else []
        source = json.loads((root / f"docs/plans/t{task[1:]}.intent.json").read_text())
        source.update(task_id=task, goal=f"Do {task}", scope_hint=[f"{task}.txt"])
        (root / f"docs/plans/{task}.intent.json").write_text(json.dumps(source))
    (root / "docs/initiatives/again.md").write_text("\n".join(lines) + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "again")


def run_batch(repo: Path, slug: str, lanes: int, seconds: float, times: Path) -> float:
    env = {**os.environ, "BENCH_SECONDS": str(seconds), "BENCH_TIMES": str(times),
           # lane code may write only there, in its sandbox (ADR 0048)
           "IMM_SANDBOX_WRITABLE": str(times.parent)}  # fmt: skip
    executor = shlex.join(["sh", "-c", EXECUTOR_SCRIPT])
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "imm_action", "run", slug, "--repo", str(repo),
         "--max-parallel", str(lanes), "--executor", executor],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started


def run_one(files: int, tasks: int, lanes: int, seconds: float) -> tuple[float, float]:
    """Walls of the cold and the warm batch."""
    graph = make_dag(tasks)
    scratch = Path(tempfile.mkdtemp(prefix="imm-bigrepo-"))
    try:
        repo = scratch / "repo"
        repo.mkdir()
        write_project(repo, graph, lanes)
        add_second_initiative(repo, graph)
        add_filler(repo, files)
        times = scratch / "times.txt"
        times.touch()
        cold = run_batch(repo, "bench", lanes, seconds, times)
        warm = run_batch(repo, "again", lanes, seconds, times)
        done = len(times.read_text().splitlines())
        if done != 2 * tasks:
            raise SystemExit(f"only {done} of {2 * tasks} executors ran")
        return cold, warm
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
    print("extra/task = (wall - wall of the smallest repository) / tasks, per batch")
    print(
        f"{'files':>7} {'cold wall':>10} {'extra/task':>10} {'warm wall':>10} {'extra/task':>10}"
        f" {'load':>5}"
    )
    baseline: tuple[float, float] | None = None
    for files in sizes:
        cold, warm = run_one(files, args.tasks, args.lanes, args.seconds)
        baseline = (cold, warm) if baseline is None else baseline
        cold_extra = (cold - baseline[0]) / args.tasks
        warm_extra = (warm - baseline[1]) / args.tasks
        print(
            f"{files:>7} {cold:9.1f}s {cold_extra:9.2f}s {warm:9.1f}s {warm_extra:9.2f}s"
            f" {os.getloadavg()[0]:5.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
