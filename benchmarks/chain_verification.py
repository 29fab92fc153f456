"""Verification on the critical path of a chain (issue 61): pluggy 1.7.0's own suite as the only
branch check (`held_checks: branch`, or `all` with `--held all`), six tasks reviewing one module
one after another (each blocked by the one before: a chain by scope, as on a real library) and
one task that breaks the suite (it is parked). Run with speculative lanes on and off, alternated
in the same run.

Printed for each: wall over the chain's critical path (its six executors' seconds: no schedule
ends sooner), wall over the chain's lanes as they ran (each lane's own checks and start-up
too), and the share of the wall the chain spent waiting — from one chain lane's end to the next
one's start, and from the last one's end to the batch's end: verification's share. Needs the package
registry once (`pip download`), then works offline.

    python benchmarks/chain_verification.py [--seconds 2] [--runs 3] [--held branch|all]
    python benchmarks/chain_verification.py --runs 3 --reruns both

`--reruns both` measures what confirming the breaker costs instead (ADR 0073): its failing
test rerun alone (the default) against whole runs of the suite (its command says `-p
no:imm_tests_alone`), speculative lanes on, alternated — the check runs of the batch, and the
seconds from the breaker's lane's end to the stack that parked it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.branch_checks import PYTEST, fetch, write_pluggy  # noqa: E402
from imm_action.verify.tests_alone import PLUGIN  # noqa: E402

CHAIN = [f"c{index}" for index in range(6)]
MODULE = "src/pluggy/_hooks.py"
BREAKER = "brk"
_STAMP = re.compile(r"^imm \[\s*([0-9.]+)s\]: lane (\S+) (started|ended)")


def write_project(
    root: Path, source: Path, speculative: bool, held: str = "branch", whole: bool = False
) -> None:
    """`whole`: the suite's command keeps imm's plugin out, so every rerun runs it whole."""
    suite = shlex.join(["python3", *PYTEST, *(["-p", f"no:{PLUGIN}"] if whole else []), "testing"])
    config = (
        f"max_parallel: 3\nheld_checks: {held}\nspeculative_lanes: {str(speculative).lower()}\n"
        f"branch_checks:\n  - name: suite\n    command: {suite!r}\n"
    )
    reviews = {task: (MODULE, "testing/test_hookcaller.py", tuple(CHAIN[:index][-1:]))
               for index, task in enumerate(CHAIN)}  # fmt: skip
    reviews[BREAKER] = ("testing/test_details.py", "testing/test_hookcaller.py", ())
    write_pluggy(root, source, config, reviews, "chain")


def executor(scratch: Path, seconds: float) -> str:
    """Each chain task appends a comment to the module; the breaker adds a failing test (the
    suite tests the pluggy pytest itself imported: a change to its code is never seen)."""
    script = scratch / "review.py"
    script.write_text(
        "import os, pathlib, time\n"
        f"time.sleep({seconds})\n"
        "task = os.environ['IMM_TASK_ID']\n"
        f"if task == {BREAKER!r}:\n"
        "    p = pathlib.Path('testing/test_details.py')\n"
        "    p.write_text(p.read_text() + '\\n\\ndef test_broken():\\n    assert False\\n')\n"
        "else:\n"
        f"    p = pathlib.Path({MODULE!r})\n"
        "    p.write_text(p.read_text() + f'# reviewed by {task}\\n')\n"
    )
    return shlex.join([sys.executable, str(script)])


def run_once(
    source: Path, seconds: float, speculative: bool, held: str, whole: bool = False
) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="imm-chain-"))
    try:
        repo = scratch / "repo"
        write_project(repo, source, speculative, held, whole)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "chain", "--repo", str(repo),
             "--executor", executor(scratch, seconds)],
            capture_output=True, text=True, check=False,
            env={**os.environ,
                 "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        )  # fmt: skip
        wall = time.perf_counter() - started
        if done.returncode != 1 or "brk" not in done.stdout:
            raise SystemExit(f"expected the breaker parked:\n{done.stdout}\n{done.stderr}")
        landed = re.findall(r"^\s+(\S+)\s+integrated", done.stdout, re.MULTILINE)
        if set(CHAIN) - set(landed):
            raise SystemExit(f"expected the chain landed:\n{done.stdout}")
        return {**measure(done.stderr, wall, seconds), **breaker_cost(done.stderr, done.stdout)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def breaker_cost(log: str, said: str) -> dict[str, float]:
    """The batch's integration check runs, and the seconds from the breaker's lane's end to
    the stack line that found it."""
    ended = found = 0.0
    for line in log.splitlines():
        stamp = re.match(r"^imm \[\s*([0-9.]+)s\]: (.*)$", line)
        if stamp and stamp.group(2).startswith(f"lane {BREAKER} ended"):
            ended = float(stamp.group(1))
        elif stamp and f"bisection found {BREAKER} " in stamp.group(2):
            found = float(stamp.group(1))
    runs = re.search(r"integration: .*?(\d+) check runs", said + log)
    return {"runs": float(runs.group(1)) if runs else -1.0, "parked_after": found - ended}


def measure(log: str, wall: float, seconds: float) -> dict[str, float]:
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in log.splitlines():
        found = _STAMP.match(line)
        if found and found.group(2) in CHAIN:
            (starts if found.group(3) == "started" else ends)[found.group(2)] = float(
                found.group(1)
            )
    waits = sum(max(0.0, starts[later] - ends[earlier]) for earlier, later in pairwise(CHAIN))
    waits += max(0.0, wall - ends[CHAIN[-1]])
    critical = seconds * len(CHAIN)
    lanes = sum(ends[task] - starts[task] for task in CHAIN)  # the chain's lanes as they ran
    return {"wall": wall, "ratio": wall / critical, "lanes": wall / lanes, "share": waits / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="each executor's time")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "imm-pluggy")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; medians printed")
    parser.add_argument("--held", choices=["branch", "all"], default="branch")
    parser.add_argument("--reruns", choices=["both"], help="alone against whole (ADR 0073)")
    args = parser.parse_args()
    source = fetch(args.cache)
    if args.reruns:
        return compare_reruns(source, args.seconds, args.runs, args.held)
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"pluggy 1.7.0: a chain of {len(CHAIN)} tasks on one module and a breaker, executors "
          f"{args.seconds} s each; the suite the only branch check, "
          f"held_checks: {args.held}")  # fmt: skip
    found: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for run in range(args.runs):
        for speculative in (True, False):  # alternated: a drifting load hits both alike
            got = run_once(source, args.seconds, speculative, args.held)
            found[speculative].append(got)
            mode = "on " if speculative else "off"
            print(f"  speculative lanes {mode}: wall {got['wall']:.1f} s, wall / critical path "
                  f"{got['ratio']:.2f} (/ its lanes as they ran {got['lanes']:.2f}), the chain "
                  f"waiting {got['share']:.0%}   (run {run + 1})", flush=True)  # fmt: skip
    print("medians:")
    for speculative, runs in found.items():
        ratio = statistics.median(run["ratio"] for run in runs)
        lanes = statistics.median(run["lanes"] for run in runs)
        share = statistics.median(run["share"] for run in runs)
        print(f"  speculative lanes {'on ' if speculative else 'off'}: wall / critical path "
              f"{ratio:.2f} (/ its lanes as they ran {lanes:.2f}), the chain waiting "
              f"{share:.0%}")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def compare_reruns(source: Path, seconds: float, runs: int, held: str) -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"pluggy 1.7.0: the chain and the breaker, held_checks: {held}; the breaker's "
          "failing test rerun alone against the whole suite")  # fmt: skip
    found: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for run in range(runs):
        for whole in (False, True):  # alternated: a drifting load hits both alike
            got = run_once(source, seconds, True, held, whole)
            found[whole].append(got)
            print(f"  {'whole' if whole else 'alone'}: wall {got['wall']:.1f} s, "
                  f"{got['runs']:.0f} check runs, the breaker parked "
                  f"{got['parked_after']:.1f} s after its lane ended   (run {run + 1})",
                  flush=True)  # fmt: skip
    print("medians:")
    for whole, got in found.items():
        print(f"  {'whole' if whole else 'alone'}: wall "
              f"{statistics.median(g['wall'] for g in got):.1f} s, the breaker parked "
              f"{statistics.median(g['parked_after'] for g in got):.1f} s after its lane "
              "ended")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
