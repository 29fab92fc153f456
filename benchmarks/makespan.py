"""Makespan of a local batch (`imm run`) against the ideal zero-overhead list schedule.

A DAG of sleeping tasks (disjoint scopes) runs with 2, 4 and 8 lanes. For each, the ideal is the
list schedule of the same DAG with no overhead at all: whenever a lane is free, the first
startable task in plan order starts on it. Prints wall time, the ideal, and their ratio.
`--chain N` measures the latency of a dependency hop instead: a chain of N tasks whose
executors do nothing but write their file, wall / N per hop (SPEC §9: <= 0.35 s).

    python benchmarks/makespan.py [--tasks 16] [--seconds 2.0] [--spread 0.2] [--lanes 2,4,8]
    python benchmarks/makespan.py --tasks 10 --seconds 2 --spread 0.5 --lanes 3 --runs 5
    python benchmarks/makespan.py --chain 6 --runs 5
    python benchmarks/makespan.py --tasks 10 --seconds 2 --spread 0.5 --lanes 3 --runs 5 \
        --checks small

`--checks small` gives every task 1-3 trivial checks of its own (`test -f`/`-s`/`-r` of its
file, no `reads`): the shape of issue 42 #7, where every move reruns every held check and the
checks, not the lanes, are what imm adds; the default is one shared `true` (the cache runs it
once per tree).
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import write_project as generated_project  # noqa: E402
from imm_action.plan.dag import kahn_order  # noqa: E402


def executor_script(seconds: dict[str, float]) -> str:
    """A shell, not python (as in batch_scaling.py): an interpreter's start-up, ~30 ms a task
    on 2 cores, is the executor's own cost, which the ideal schedule does not hold either."""
    cases = "".join(f"  {task}) sleep {duration} ;;\n" for task, duration in seconds.items())
    return f'case "$IMM_TASK_ID" in\n{cases}esac\necho "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"\n'


def make_dag(tasks: int, seed: int = 3) -> dict[str, list[str]]:
    rng = random.Random(seed)
    names = [f"t{index:02d}" for index in range(tasks)]
    return {
        name: sorted(rng.sample(names[:index], k=min(index, rng.randint(0, 2)))) if index else []
        for index, name in enumerate(names)
    }


def remaining_path(graph: dict[str, list[str]]) -> dict[str, int]:
    """Each task's longest chain of tasks from it to the end, itself included: the order in
    which `imm run` admits (critical path first, ties by plan order; ADR 0056)."""
    height: dict[str, int] = {}
    for task in reversed(kahn_order(graph)):
        below = [height[other] for other, needs in graph.items() if task in needs]
        height[task] = 1 + max(below, default=0)
    return height


def critical_path_bound(graph: dict[str, list[str]], seconds: dict[str, float]) -> float:
    """No schedule, on any number of lanes, ends before its longest chain of work."""
    finish: dict[str, float] = {}
    for task in kahn_order(graph):
        finish[task] = seconds[task] + max((finish[need] for need in graph[task]), default=0.0)
    return max(finish.values())


def ideal_list_schedule(
    graph: dict[str, list[str]], seconds: dict[str, float], lanes: int, critical: bool = False
) -> float:
    """The list schedule with no overhead: a free lane takes the first startable task in plan
    order, or (`critical`) the one with the longest chain after it, ties by plan order."""
    order = kahn_order(graph)
    if critical:
        height = remaining_path(graph)
        order = sorted(order, key=lambda task: -height[task])  # stable: plan order in ties
    done_at: dict[str, float] = {}
    running: list[tuple[float, str]] = []
    pending = list(order)
    now = 0.0
    while pending or running:
        startable = [
            t for t in pending if all(n in done_at and done_at[n] <= now for n in graph[t])
        ]
        while startable and len(running) < lanes:
            task = startable.pop(0)
            pending.remove(task)
            heapq.heappush(running, (now + seconds[task], task))
        finish, task = heapq.heappop(running)
        now = finish
        done_at[task] = finish
    return now


def write_project(
    root: Path, graph: dict[str, list[str]], checks: str = "shared", speculative: bool = True
) -> None:
    # Trivial checks (coreutils): what is measured is imm's own overhead, and on machines where
    # `python3` is a pyenv shim every check would add ~0.1 s of shell start-up.
    config = "" if speculative else "speculative_lanes: false\n"
    if checks == "shared":
        check = {"executable": "true", "argv": [], "timeout_ms": 60000}
        generated_project(root, "bench", graph, dict.fromkeys(graph, check), config=config)
        return
    rng = random.Random(11)
    own = {
        task: [{"executable": "test", "argv": [flag, f"{task}.txt"], "timeout_ms": 60000}
               for flag in ("-f", "-s", "-r")[: rng.randint(1, 3)]]
        for task in graph
    }  # fmt: skip
    firsts = {task: commands[0] for task, commands in own.items()}
    more = {task: commands[1:] for task, commands in own.items()}
    generated_project(root, "bench", graph, firsts, more_checks=more, config=config)


def run_batch(
    graph: dict[str, list[str]],
    seconds: dict[str, float],
    lanes: int,
    checks: str = "shared",
    speculative: bool = True,
) -> float:
    """Wall seconds of one `imm run` of the DAG with `lanes` lanes."""
    scratch = Path(tempfile.mkdtemp(prefix="imm-makespan-"))
    try:
        repo = scratch / "repo"
        repo.mkdir()
        write_project(repo, graph, checks, speculative)
        (scratch / "executor.sh").write_text(executor_script(seconds))
        executor = shlex.join(["sh", str(scratch / "executor.sh")])
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "bench", "--repo", str(repo),
             "--max-parallel", str(lanes), "--executor", executor],
            check=True, capture_output=True,
        )  # fmt: skip
        return time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--spread", type=float, default=0.2, help="durations: seconds ± this")
    parser.add_argument("--lanes", default="2,4,8")
    parser.add_argument("--chain", type=int, help="a chain of this many trivial tasks instead")
    parser.add_argument("--runs", type=int, default=1, help="the median of this many runs")
    parser.add_argument("--checks", choices=["shared", "small"], default="shared")
    parser.add_argument(
        "--speculative", choices=["on", "off", "both"], default="on",
        help="speculative lanes (issue 61); both: each run of one beside one of the other",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    if args.chain:
        names = [f"t{index:02d}" for index in range(args.chain)]
        chain = {name: names[index - 1 : index] for index, name in enumerate(names)}
        walls = sorted(run_batch(chain, dict.fromkeys(chain, 0.0), 1) for _ in range(args.runs))
        wall = walls[len(walls) // 2]
        hop = wall / args.chain
        print(f"a chain of {args.chain} trivial tasks: {wall:.2f} s, {hop:.3f} s per hop")
        print(f"  (runs: {', '.join(f'{w:.2f}' for w in walls)}; load {os.getloadavg()[0]:.2f})")
        return 0
    graph = make_dag(args.tasks)
    rng = random.Random(5)
    low, high = 1 - args.spread, 1 + args.spread
    seconds = {task: round(args.seconds * rng.uniform(low, high), 2) for task in graph}
    work = sum(seconds.values())
    print(f"{args.tasks} tasks, {work:.1f} s of work, about {args.seconds} s each, "
          f"checks: {args.checks}")  # fmt: skip
    bound = critical_path_bound(graph, seconds)
    print(f"critical-path bound (no schedule ends sooner): {bound:.2f} s")
    print(
        f"{'lanes':>5} {'imm run':>9} {'plan-order':>11} {'ratio':>6} {'crit-first':>11} "
        f"{'ratio':>6} {'/bound':>7}   runs (against plan-order)"
    )
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.speculative]
    for lanes in [int(n) for n in args.lanes.split(",")]:
        found: dict[bool, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.runs):  # alternated: the load falls on both alike
            for mode in modes:
                found[mode].append(run_batch(graph, seconds, lanes, args.checks, mode))
        ideal = ideal_list_schedule(graph, seconds, lanes)
        critical = ideal_list_schedule(graph, seconds, lanes, critical=True)
        for mode in modes:
            walls = sorted(found[mode])
            wall = walls[len(walls) // 2]
            label = "" if len(modes) == 1 else f"  speculative lanes {'on' if mode else 'off'}"
            print(
                f"{lanes:>5} {wall:8.2f}s {ideal:10.2f}s {wall / ideal:6.2f} {critical:10.2f}s "
                f"{wall / critical:6.2f} {wall / bound:7.2f}   "
                f"{', '.join(f'{w / ideal:.2f}' for w in walls)}{label}",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
