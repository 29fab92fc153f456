"""Flake-safe blame (issue 61, ADR 0071): batches of honest lanes under a branch suite holding a
test that fails at random, one in `--rate` of its runs; how many lanes are parked, and what the
confirmation reruns cost in check runs against the same batches with the test made steady (the
baseline, measured in the same run). With `--breaker`, one more lane breaks another test of the
suite: it must be parked in every batch, and the honest lanes land.

Each batch is a fresh repository and one `imm run` (the embedded local runner): 8 tasks of their
own (each judged by `test -f` of its file), the suite (pytest: the steady test, the random one)
as `branch_checks`.

    python benchmarks/flaky_blame.py --batches 20 --rate 0.05
    python benchmarks/flaky_blame.py --batches 20 --rate 0.05 --breaker
    python benchmarks/flaky_blame.py --batches 5 --rate 0.5 --breaker
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generate import write_project  # noqa: E402

HONEST = [f"t{index}" for index in range(8)]
BREAKER = "brk"
SUITE = (
    "import pathlib\nimport random\n\n\n"
    "def test_steady():\n    assert not pathlib.Path('brk.txt').exists()\n\n\n"
    "def test_random():\n"
    "    rate = float(pathlib.Path('flaky_rate').read_text())\n"
    "    assert random.random() >= rate\n"
)
EXECUTOR = 'echo "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"\n'
ROW = re.compile(r"^\s+(t\d|brk)\s+(\w+)", re.MULTILINE)
RUNS = re.compile(r"integration: .*?(\d+) check runs?")


@dataclass(frozen=True)
class Batch:
    landed: int
    parked_honest: int
    breaker_parked: bool | None  # None: no breaker
    check_runs: int
    seconds: float


def run_batch(rate: float, breaker: bool) -> Batch:
    scratch = Path(tempfile.mkdtemp(prefix="imm-flaky-"))
    scratch.chmod(0o755)
    try:
        repo = scratch / "repo"
        repo.mkdir()
        tasks = [*HONEST, *([BREAKER] if breaker else [])]
        checks = {task: {"executable": "test", "argv": ["-f", f"{task}.txt"]} for task in tasks}
        suite = "python3 -m pytest -q -p no:cacheprovider tests"
        write_project(
            repo, "bench", {task: [] for task in tasks}, checks,
            config=f"branch_checks:\n  - {suite}\nmax_parallel: 4\n",
            files={"flaky_rate": f"{rate}\n"},
        )  # fmt: skip
        (repo / "tests").mkdir()
        (repo / "tests/test_suite.py").write_text(SUITE)
        for args in (["add", "-A"], ["commit", "-qm", "the suite"]):
            subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
        (scratch / "executor.sh").write_text(EXECUTOR)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "bench", "--repo", str(repo),
             "--executor", shlex.join(["sh", str(scratch / "executor.sh")])],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        states = dict(ROW.findall(done.stdout))
        runs = RUNS.search(done.stdout)
        if runs is None or len(states) != len(tasks):
            raise RuntimeError(f"imm run said:\n{done.stdout}\n{done.stderr}")
        return Batch(
            landed=sum(1 for task in HONEST if states[task] == "integrated"),
            parked_honest=sum(1 for task in HONEST if states[task] != "integrated"),
            breaker_parked=states[BREAKER] != "integrated" if breaker else None,
            check_runs=int(runs.group(1)),
            seconds=seconds,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _said(batch: Batch) -> str:
    caught = "" if batch.breaker_parked is None else f", breaker parked {batch.breaker_parked}"
    return (f"{batch.landed} landed, {batch.check_runs} check runs, {batch.seconds:.1f} s"
            f"{caught}")  # fmt: skip


def summary(label: str, batches: list[Batch]) -> str:
    parked = sum(batch.parked_honest for batch in batches)
    runs = sum(batch.check_runs for batch in batches)
    seconds = sorted(batch.seconds for batch in batches)[len(batches) // 2]
    line = (
        f"{label:>10}: {len(batches)} batches, honest lanes parked {parked} of "
        f"{len(batches) * len(HONEST)}, check runs {runs}, median batch {seconds:.1f} s"
    )
    caught = [batch.breaker_parked for batch in batches if batch.breaker_parked is not None]
    if caught:
        line += f", breaker parked in {sum(caught)} of {len(caught)}"
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rate", type=float, default=0.05, help="the random test's failures")
    parser.add_argument("--breaker", action="store_true", help="one more lane breaks the suite")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    steady: list[Batch] = []
    flaky: list[Batch] = []
    for number in range(args.batches):  # alternated: the load falls on both alike
        steady.append(run_batch(0.0, args.breaker))
        flaky.append(run_batch(args.rate, args.breaker))
        print(f"  batch {number + 1}: steady {_said(steady[-1])}; flaky {_said(flaky[-1])}",
              flush=True)  # fmt: skip
    print(summary("steady", steady))
    print(summary(f"rate {args.rate}", flaky))
    ratio = sum(b.check_runs for b in flaky) / max(1, sum(b.check_runs for b in steady))
    print(f"check runs, flaky against steady: {ratio:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
