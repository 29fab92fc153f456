"""Planning at scale: `imm plan` as a process on generated 1k/3k/10k-task initiatives.

Prints, per size: the wall time of `imm plan` (reading every file, best of --repeat), the time
of our parallel-group projection alone, and — measured in the same run on the same DAG — the
reference's projection algorithm (a literal port, tests/reference_port.py) as the baseline, with
the ratio. Ends with the growth exponent of `imm plan` between the smallest and largest size.

    python benchmarks/plan_scaling.py [--sizes 1000,3000,10000] [--repeat 3] [--no-reference]
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generate import feature_initiative, write_initiative  # noqa: E402
from imm_action.plan.dag import kahn_order, transitive_closures  # noqa: E402
from imm_action.plan.schedule import ScheduleChild, parallel_groups  # noqa: E402
from tests import reference_port  # noqa: E402

SLUG = "big"


def time_plan_process(repo: Path, repeat: int) -> tuple[float, int]:
    imm = [sys.executable, "-m", "imm_action", "plan", SLUG, "--repo", str(repo)]
    best = math.inf
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(imm, capture_output=True, check=True)
        best = min(best, time.perf_counter() - started)
        size = len(done.stdout)
    return best, size


def time_projection(tasks: int, with_reference: bool) -> tuple[float, float | None]:
    generated = feature_initiative(tasks)
    order = kahn_order(generated.dependencies)
    closures = transitive_closures(order, generated.dependencies)
    ours_input = [ScheduleChild(t, tuple(closures[t]), tuple(generated.scopes[t])) for t in order]
    started = time.perf_counter()
    ours = parallel_groups(ours_input)
    ours_time = time.perf_counter() - started
    if not with_reference:
        return ours_time, None
    reference_input = [
        {"task_id": t, "blocked_by": closures[t], "scope_hint": generated.scopes[t]} for t in order
    ]
    started = time.perf_counter()
    expected = reference_port.project_parallel_groups(reference_input)
    reference_time = time.perf_counter() - started
    if ours.parallel_groups != expected["parallel_groups"]:
        raise SystemExit(f"projection differs from the reference at {tasks} tasks")
    return ours_time, reference_time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true", help="skip the slow baseline")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        f"{'tasks':>6} {'imm plan':>9} {'output':>9} {'groups':>8} {'reference':>10} {'ratio':>7}"
    )
    results = []
    for tasks in sizes:
        workdir = Path(tempfile.mkdtemp(prefix=f"imm-bench-{tasks}-"))
        try:
            write_initiative(workdir, SLUG, tasks)
            plan_time, output = time_plan_process(workdir, args.repeat)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ours, reference = time_projection(tasks, not args.no_reference)
        ratio = f"{reference / ours:6.0f}x" if reference else "     -"
        ref_text = f"{reference:9.3f}s" if reference else "         -"
        print(f"{tasks:>6} {plan_time:8.3f}s {output / 1e6:7.1f}MB {ours:7.3f}s {ref_text} {ratio}")
        results.append((tasks, plan_time))
    if len(results) >= 2:
        (small, small_time), (large, large_time) = results[0], results[-1]
        exponent = math.log(large_time / small_time) / math.log(large / small)
        print(f"growth exponent of imm plan, {small}->{large} tasks: {exponent:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
