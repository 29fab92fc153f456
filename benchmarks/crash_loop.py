"""Crash safety while stacks are verified and bisected (issue 22): `imm run` killed with SIGKILL
(its whole process group: coordinator, background worker, lanes) at random moments, run again,
and again; then run to its end. Each trial must end exactly as an uninterrupted run of the same
batch: the same tasks integrated (each exactly once on the branch), the same culprits parked,
the same final tree.

Every task has a check of its own that sleeps a little; two tasks are culprits (their own check
fails once a task they depend on is on the branch), so passes bisect stacks while they are being
killed. `--load K` keeps K busy processes running beside the trials.

    python benchmarks/crash_loop.py [--trials 20] [--tasks 12] [--kills 4] [--load 2] [--first 0]

A trial that ends differently is kept (its repository and its runs' output) under `--keep`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import bench_git, own_check, write_project  # noqa: E402

EXECUTOR = """import os, pathlib, time
task = os.environ["IMM_TASK_ID"]
time.sleep(0.3)
pathlib.Path(f"{task}.txt").write_text(task + "\\n")
"""
CULPRITS = {"t05": "t02", "t09": "t08"}  # task: the task whose file breaks its own check


def dag(tasks: int) -> dict[str, list[str]]:
    names = [f"t{index:02d}" for index in range(tasks)]
    graph: dict[str, list[str]] = {name: [] for name in names}
    for task, breaker in CULPRITS.items():
        if task in graph and breaker in graph:
            graph[task] = [breaker]  # it always sees the file that breaks it: a sure culprit
    return graph


def make_project(root: Path, graph: dict[str, list[str]]) -> None:
    checks = {task: own_check(task, "sleep 0.2", CULPRITS.get(task)) for task in graph}
    config = "max_parallel: 4\nverify_parallel: 2\n"
    write_project(root, "crash", graph, checks, config=config, files={"executor.py": EXECUTOR})


def start(repo: Path, output: int | IO[bytes] = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    executor = shlex.join([sys.executable, str(repo / "executor.py")])
    return subprocess.Popen(
        [sys.executable, "-m", "imm_action", "run", "crash", "--repo", str(repo),
         "--executor", executor],
        stdout=output, stderr=output, start_new_session=True,
    )  # fmt: skip


@dataclass(frozen=True)
class Ending:
    """What a finished batch left: its tree, and how often each landed task is on the branch."""

    tree: str
    landed: dict[str, int]
    kills: int = 0

    def same(self, other: Ending) -> bool:
        return (self.tree, self.landed) == (other.tree, other.landed)


def outcome(repo: Path, graph: dict[str, list[str]], kills: int = 0) -> Ending:
    subjects = bench_git(repo, "log", "--format=%s", "imm/crash").splitlines()
    landed = {task: sum(s.startswith(f"imm({task}):") for s in subjects) for task in graph}
    tree = bench_git(repo, "rev-parse", "imm/crash^{tree}").strip()
    return Ending(tree, {task: count for task, count in landed.items() if count}, kills)


def trial(scratch: Path, graph: dict[str, list[str]], kills: int, seed: int) -> Ending:
    repo = scratch / f"trial-{seed}"
    repo.mkdir()
    make_project(repo, graph)
    moments = random.Random(seed)
    killed = 0
    log = scratch / f"trial-{seed}.log"  # every run's output, kept with a trial that differs
    with open(log, "ab") as output:
        for _ in range(kills):
            process = start(repo, output)
            time.sleep(moments.uniform(0.3, 2.5))
            if process.poll() is not None:
                break
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            output.write(f"--- killed with SIGKILL ({killed + 1})\n".encode())
            output.flush()
            killed += 1
        start(repo, output).wait(600)
    return outcome(repo, graph, killed)


def keep(scratch: Path, seed: int, into: Path) -> Path:
    """A trial that differs, kept for a look: its repository and the output of its runs."""
    kept = into / f"trial-{seed}"
    shutil.copytree(scratch / f"trial-{seed}", kept, symlinks=True)
    shutil.copy(scratch / f"trial-{seed}.log", into / f"trial-{seed}.log")
    return kept


def forget(scratch: Path, seed: int) -> None:
    shutil.rmtree(scratch / f"trial-{seed}", ignore_errors=True)
    (scratch / f"trial-{seed}.log").unlink(missing_ok=True)


def busy() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the trials")
    parser.add_argument("--first", type=int, default=0, help="the first trial's seed")
    parser.add_argument(
        "--keep",
        type=Path,
        default=Path(tempfile.gettempdir()) / "imm-crash-kept",
        help="where a trial that differs is kept (its repository, its runs' output)",
    )
    args = parser.parse_args()
    graph = dag(args.tasks)
    args.keep.mkdir(parents=True, exist_ok=True)
    hogs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    print(f"crash loop: {args.trials} trials of {args.tasks} tasks, up to {args.kills} SIGKILLs "
          f"each, {args.load} busy processes beside them")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="imm-crash-") as scratch:
        clean = Path(scratch) / "clean"
        clean.mkdir()
        make_project(clean, graph)
        start(clean).wait(600)
        expected = outcome(clean, graph)
        once = all(count == 1 for count in expected.landed.values())
        parked = sorted(set(graph) - set(expected.landed))
        print(f"uninterrupted: {len(expected.landed)} of {len(graph)} landed (each once: {once}),"
              f" parked {parked}")  # fmt: skip
        good = 0
        for seed in range(args.first, args.first + args.trials):
            found = trial(Path(scratch), graph, args.kills, seed)
            same = found.same(expected)
            good += same
            kept = "" if same else f" (kept: {keep(Path(scratch), seed, args.keep)})"
            forget(Path(scratch), seed)
            print(f"trial {seed:2d}: {found.kills} kills, "
                  f"{'same as uninterrupted' if same else f'DIFFERENT: {found}{kept}'}",
                  flush=True)  # fmt: skip
        print(f"{good} of {args.trials} trials ended exactly as the uninterrupted run; "
              f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    for hog in hogs:
        hog.terminate()
    return 0 if good == args.trials else 1


if __name__ == "__main__":
    raise SystemExit(main())
