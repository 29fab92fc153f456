"""How a whole `imm run` scales with the number of tasks (issue 13, SPEC §9).

A DAG of N tasks — independent tasks and chains of three — whose executors sleep 0.2 s and
write one file, run with 8 lanes. The ideal is the zero-overhead list schedule of the same DAG
(whenever a lane is free, the first startable task in plan order starts on it), computed here.
For each N it prints:

- wall and ideal makespan and their ratio;
- imm's own cost per task, (wall - ideal) / N, and its ratio to the same figure at the
  smallest N of the run (the goal: <= 0.15 s at N = 1,000, within 25 % of N = 50);
- lane utilisation, two ways:
  `slots`: slot occupancy — seconds a lane slot holds a running lane (from `lane ... started`
  to the coordinator seeing it end, in imm run's event log) over lanes x the seconds in which
  startable work exists (a task not started yet whose dependencies are all integrated);
  `exec`: the executor-busy fraction — seconds executors sleep over wall x lanes (what the
  previous figures called utilisation), next to the ideal's;
- what the finished batch leaves: refs under refs/imm and refs/heads/imm*, and the size of .git.

A calibration (100 `git rev-parse` processes) runs first and after each N, so a reader sees how
loaded the machine was; the load average is printed too.

    python benchmarks/batch_scaling.py [--sizes 50,200,1000] [--lanes 8] [--seconds 0.2]
    python benchmarks/batch_scaling.py --quick        # N = 20, 60 for iteration
    python benchmarks/batch_scaling.py --baseline-src ../old/src   # and the old imm, same run
    python benchmarks/batch_scaling.py --sizes 50,200 --runs 3     # median of 3 runs per N
    python benchmarks/batch_scaling.py --checks shared   # one `true` check shared by all tasks
    python benchmarks/batch_scaling.py --checks own-reads   # each check declares what it reads

Every task has a check of its own by default, and the row says how many descriptor runs the
integrator made per task (`checks/task`): a shared check hides that cost.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import bench_git as git  # noqa: E402  (big_repo.py uses it too)
from benchmarks.generate import scratch_with_repo  # noqa: E402
from benchmarks.generate import write_project as generated_project  # noqa: E402
from benchmarks.makespan import ideal_list_schedule  # noqa: E402

# A shell, not python: an interpreter start would count as imm's overhead. `$0` is the task id.
EXECUTOR_SCRIPT = (
    'start=$(date +%s.%N); sleep "$BENCH_SECONDS"; echo "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"; '
    'echo "$IMM_TASK_ID $start $(date +%s.%N)" >> "$BENCH_TIMES"'
)


def make_dag(tasks: int) -> dict[str, list[str]]:
    """Groups of five: a chain of three (t0 <- t1 <- t2) and two independent tasks."""
    width = len(str(tasks - 1))
    names = [f"t{index:0{width}d}" for index in range(tasks)]
    return {
        name: [names[index - 1]] if index % 5 in (1, 2) else [] for index, name in enumerate(names)
    }


def write_project(
    root: Path,
    graph: dict[str, list[str]],
    lanes: int,
    checks: Path | None = None,
    *,
    reads: bool = False,
) -> None:
    """`checks`: every task has a check of its own, which logs its run there (the shape users
    have: each task brings its tests). None: every task shares one trivial check (`true`),
    which the (tree, descriptor) cache runs once per tree and so hides the integrator's cost.
    `reads`: each check declares the one file it reads (its task's), so a move that does not
    change it carries its last pass over; without, every integrated task's check runs again on
    every move of the branch (SPEC §5.4)."""
    # the executor sees only an allowlist of the environment, plus what the config names
    config = f"max_parallel: {lanes}\nexecutor_env: [BENCH_SECONDS, BENCH_TIMES]\n"
    commands = {
        task: {"executable": "sh", "argv": ["-c", f"echo {task} >> {checks}"], "timeout_ms": 60000}
        if checks is not None
        else {"executable": "true", "argv": [], "timeout_ms": 60000}
        for task in graph
    }
    declared = {task: [f"{task}.txt"] for task in graph} if reads else None
    generated_project(root, "bench", graph, commands, config=config, reads=declared)


def calibrate() -> float:
    """Seconds for 100 trivial git processes: the machine's load, in the unit imm pays."""
    started = time.perf_counter()
    for _ in range(100):
        subprocess.run(["git", "--version"], check=True, capture_output=True)
    return time.perf_counter() - started


def disk_usage(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def busy_seconds(times: Path) -> float:
    total = 0.0
    for line in times.read_text().splitlines():
        _task, start, end = line.split()
        total += float(end) - float(start)
    return total


EVENT = re.compile(r"imm \[\s*([\d.]+)s\]: (?:lane (\S+) (started|ended)|integrated (\S+) as)")


def slot_occupancy(events: str, graph: dict[str, list[str]], lanes: int) -> float:
    """Lane-slot seconds held by running lanes over lanes x the seconds in which startable work
    exists (a task not started whose dependencies are integrated), from imm run's event log."""
    timeline: list[tuple[float, str, str]] = []
    for match in EVENT.finditer(events):
        at, task, what, landed = match.groups()
        timeline.append((float(at), task or landed, what or "integrated"))
    timeline.sort(key=lambda event: event[0])
    started: set[str] = set()
    integrated: set[str] = set()
    running = 0
    held = window = 0.0
    previous = 0.0
    for at, task, what in timeline:
        startable = any(
            t not in started and all(need in integrated for need in needs)
            for t, needs in graph.items()
        )
        if startable:
            window += at - previous
            held += running * (at - previous)
        previous = at
        if what == "started":
            started.add(task)
            running += 1
        elif what == "ended":
            running -= 1
        else:
            integrated.add(task)
    return held / (window * lanes) if window else 1.0


def run_one(
    tasks: int,
    lanes: int,
    seconds: float,
    source: str | None = None,
    *,
    own_checks: bool = True,
    reads: bool = False,
) -> dict[str, float]:
    graph = make_dag(tasks)
    durations = dict.fromkeys(graph, seconds)
    scratch, repo, checks = scratch_with_repo("imm-scaling-", "checks.txt")
    try:
        write_project(repo, graph, lanes, checks if own_checks else None, reads=reads)
        times = scratch / "times.txt"
        times.touch()
        env = {**os.environ, "BENCH_SECONDS": str(seconds), "BENCH_TIMES": str(times),
               # lane code may write only there, in its sandbox (ADR 0048)
               "IMM_SANDBOX_WRITABLE": str(scratch)}  # fmt: skip
        if source:  # another checkout's imm (the baseline), ahead of the installed one
            env["PYTHONPATH"] = source
        executor = shlex.join(["sh", "-c", EXECUTOR_SCRIPT])
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "bench", "--repo", str(repo),
             "--max-parallel", str(lanes), "--executor", executor],
            env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
        slots = slot_occupancy(run.stderr, graph, lanes)
        refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/imm", "refs/heads/imm")
        refs += git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/imm-lane")
        done = sum(1 for line in times.read_text().splitlines() if line.strip())
        if done != tasks:
            raise SystemExit(f"only {done} of {tasks} executors ran")
        busy = busy_seconds(times)
        check_runs = len(checks.read_text().splitlines())
        git_bytes = disk_usage(repo / ".git")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ideal = ideal_list_schedule(graph, durations, lanes)
    return {
        "wall": wall,
        "ideal": ideal,
        "busy": busy,
        "slots": slots,
        "refs": len(refs.split()),
        "git_mb": git_bytes / 1e6,
        "check_runs": check_runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--quick", action="store_true", help="N = 20, 60")
    parser.add_argument(
        "--checks",
        choices=("own", "own-reads", "shared"),
        default="own",
        help="own: each task a check of its own, every integrated one run again on every move "
        "(default); own-reads: the same, each declaring the file it reads; shared: one `true` "
        "for every task",
    )
    parser.add_argument(
        "--runs",
        default="1",
        help="runs per N, the median (by wall) is shown: one number for every N, or one per N "
        "(e.g. 3,3,1)",
    )
    parser.add_argument(
        "--baseline-src",
        help="the src folder of another imm (e.g. a worktree of an older commit): each N runs "
        "with it too, in the same run, and the row shows wall / its wall",
    )
    parser.add_argument(
        "--baseline-sizes", help="the N the baseline runs at (default: every N of --sizes)"
    )
    args = parser.parse_args()
    sizes = [20, 60] if args.quick else [int(n) for n in args.sizes.split(",")]
    runs = [int(n) for n in args.runs.split(",")]
    runs = runs * len(sizes) if len(runs) == 1 else runs
    baseline_sizes = (
        {int(n) for n in args.baseline_sizes.split(",")} if args.baseline_sizes else set(sizes)
    )
    lanes, seconds = args.lanes, args.seconds
    own = args.checks != "shared"
    reads = args.checks == "own-reads"
    print(
        f"batch scaling: {lanes} lanes, executors sleeping {seconds} s, chains of 3 and pairs, "
        + ("each task a check of its own" if own else "one shared trivial check")
        + (" declaring what it reads" if reads else "")
    )
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"calibration: 100 git processes in {calibrate():.2f} s")
    print(
        "slots = slot occupancy while startable work exists (lane-slot seconds held by running "
        "lanes / (lanes x seconds with startable work)); exec = executor-busy fraction "
        "(executor seconds / (wall x lanes)); ideal exec = the ideal schedule's"
    )
    header = (
        f"{'N':>5} {'runs':>4} {'wall':>8} {'ideal':>7} {'ratio':>6} {'cost/task':>9} "
        f"{'vs first':>8} {'slots':>5} {'exec':>5} {'ideal exec':>10} {'refs':>4} {'.git':>8} "
        f"{'load':>5} {'calib':>6} {'checks/task':>11}"
    )
    print(header)
    first: float | None = None
    for tasks, count in zip(sizes, runs, strict=True):
        figures = _median(
            [
                run_one(tasks, lanes, seconds, own_checks=own, reads=reads)
                | {"load": os.getloadavg()[0]}
                for _ in range(count)
            ]
        )
        wall, ideal = figures["wall"], figures["ideal"]
        cost = (wall - ideal) / tasks
        first = cost if first is None else first
        utilisation = figures["busy"] / (wall * lanes)
        ideal_utilisation = tasks * seconds / (ideal * lanes)
        print(
            f"{tasks:>5} {count:>4} {wall:7.1f}s {ideal:6.1f}s {wall / ideal:6.2f} {cost:8.3f}s "
            f"{cost / first:8.2f} {figures['slots']:5.2f} {utilisation:5.2f} "
            f"{ideal_utilisation:10.2f} {int(figures['refs']):>4} {figures['git_mb']:6.1f}MB "
            f"{figures['load']:5.2f} {calibrate():5.2f}s "
            f"{figures['check_runs'] / tasks if own else float('nan'):11.2f}",
            flush=True,
        )
        if args.baseline_src and tasks in baseline_sizes:
            old = _median(
                [
                    run_one(tasks, lanes, seconds, args.baseline_src, own_checks=own, reads=reads)
                    | {"load": os.getloadavg()[0]}
                    for _ in range(count)
                ]
            )
            old_cost = (old["wall"] - ideal) / tasks
            print(
                f"{'':>5} baseline: {old['wall']:7.1f}s, cost/task {old_cost:.3f}s, "
                f"slots {old['slots']:.2f}, exec {old['busy'] / (old['wall'] * lanes):.2f}, "
                f"{int(old['refs'])} refs, {old['git_mb']:.1f}MB, load {old['load']:.2f}, "
                f"checks/task {old['check_runs'] / tasks:.2f} "
                f"-> this wall / baseline wall = {wall / old['wall']:.2f}",
                flush=True,
            )
    return 0


def _median(results: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median wall (all its figures from that one run)."""
    ordered = sorted(results, key=lambda figures: figures["wall"])
    return ordered[len(ordered) // 2]


if __name__ == "__main__":
    raise SystemExit(main())
