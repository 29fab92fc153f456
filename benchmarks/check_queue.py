"""How many checks run at once by default (issue 31, decision 0049), against one per core.

One tree, N checks of its own each, run by the Verifier's queue in the sandbox: first checks
that wait (each sleeps `--seconds`), then checks that compute (each burns `--seconds` of CPU).
The baseline, measured in the same run, is a fixed count of one per core (`verify_parallel`
set to the cores, the default before). Printed per kind: the wall, the most checks that ran at
once, and the ratio against the baseline.

    python benchmarks/check_queue.py [--waiting 12] [--computing 6] [--seconds 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from imm_action.git.repo import GitRepo  # noqa: E402
from imm_action.model.descriptor import parse_descriptor  # noqa: E402
from imm_action.verify.checks import Check, TreeJob, Verifier  # noqa: E402
from imm_action.verify.result_cache import ResultCache  # noqa: E402
from tests.conftest import git, make_repo  # noqa: E402

WAITS = "time.sleep({s})"
COMPUTES = "t=time.process_time(); [0 for _ in iter(lambda: time.process_time() - t < {s}, False)]"


def _check(index: int, body: str, log: Path) -> Check:
    code = (
        "import sys,time; open(sys.argv[1],'a').write('s %f\\n' % time.time()); "
        + body
        + "; open(sys.argv[1],'a').write('e %f\\n' % time.time())"
    )
    descriptor = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": ["-c", code, str(log), str(index)]},
    }
    return Check(f"t{index}:ok", parse_descriptor(json.dumps(descriptor)))


def _most_at_once(log: Path) -> int:
    events = sorted(
        (float(at), kind) for kind, at in (line.split() for line in log.read_text().splitlines())
    )
    running = most = 0
    for _, kind in events:
        running += 1 if kind == "s" else -1
        most = max(most, running)
    return most


def measure(count: int, body: str, workers: int | None) -> tuple[float, int]:
    scratch = Path(tempfile.mkdtemp(prefix="imm-check-queue-"))
    try:
        repo = make_repo(scratch / "repo", {"a": "x\n"})
        tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
        log = scratch / "log"
        log.touch()
        checks = tuple(_check(index, body, log) for index in range(count))
        verifier = Verifier(GitRepo(repo), ResultCache(), path_env=os.environ["PATH"],
                            workers=workers)  # fmt: skip
        started = time.perf_counter()
        [results] = verifier.verify_queued([TreeJob(tree, checks)])
        wall = time.perf_counter() - started
        if not all(result.passed for result in results):
            raise SystemExit(f"a check failed: {results}")
        return wall, _most_at_once(log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=12)
    parser.add_argument("--computing", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    # the checks write their start and end where the sandbox lets them (ADR 0048)
    os.environ["IMM_SANDBOX_WRITABLE"] = tempfile.gettempdir()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({cores} cores)")
    kinds = (("wait", args.waiting, WAITS), ("compute", args.computing, COMPUTES))
    for verb, count, body in kinds:
        code = body.format(s=args.seconds)
        walls: dict[str, list[float]] = {"default": [], "one per core": []}
        most: dict[str, list[int]] = {"default": [], "one per core": []}
        for _ in range(args.repeat):  # interleaved: both see the same machine
            for label, workers in (("default", None), ("one per core", cores)):
                wall, at_once = measure(count, code, workers)
                walls[label].append(wall)
                most[label].append(at_once)
        for label, measured in walls.items():
            runs = ", ".join(f"{wall:.2f}" for wall in measured)
            print(
                f"{count} checks that {verb} {args.seconds} s, {label:<12}: "
                f"{statistics.median(measured):5.2f}s, at most {max(most[label])} at once "
                f"(walls: {runs})"
            )
        ratio = statistics.median(walls["one per core"]) / statistics.median(walls["default"])
        print(f"  one per core / default: {ratio:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
