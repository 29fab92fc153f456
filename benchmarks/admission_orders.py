"""Admission orders compared on many random DAGs, with no overhead at all (ADR 0056).

For each shape (tasks, lanes), `--dags` random DAGs as `benchmarks/makespan.py` draws them
(each task needs up to two earlier ones; durations `--seconds` ± `--spread`), the zero-overhead
list schedule of each order, as a ratio of plan order's: critical path first (what `imm run`
admits), and plan order. A pure simulation: it says which order ends sooner on average, and
on how many DAGs each loses, not what imm adds.

    python benchmarks/admission_orders.py [--dags 200] [--tasks 10,16,24] [--lanes 2,3,4]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.makespan import ideal_list_schedule, make_dag  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dags", type=int, default=200)
    parser.add_argument("--tasks", default="10,16,24")
    parser.add_argument("--lanes", default="2,3,4")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--spread", type=float, default=0.5)
    args = parser.parse_args()
    print(f"{'tasks':>5} {'lanes':>5} {'critical-first / plan-order':>28} {'worse on':>9} "
          f"{'better on':>10}")  # fmt: skip
    for tasks in (int(n) for n in args.tasks.split(",")):
        for lanes in (int(n) for n in args.lanes.split(",")):
            ratios = []
            for seed in range(args.dags):
                graph = make_dag(tasks, seed)
                rng = random.Random(seed + 1000)
                low, high = args.seconds * (1 - args.spread), args.seconds * (1 + args.spread)
                seconds = {task: round(rng.uniform(low, high), 2) for task in graph}
                plan = ideal_list_schedule(graph, seconds, lanes)
                ratios.append(ideal_list_schedule(graph, seconds, lanes, critical=True) / plan)
            worse = sum(1 for ratio in ratios if ratio > 1.0)
            better = sum(1 for ratio in ratios if ratio < 1.0)
            print(f"{tasks:>5} {lanes:>5} {statistics.mean(ratios):>28.3f} {worse:>9} "
                  f"{better:>10}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
