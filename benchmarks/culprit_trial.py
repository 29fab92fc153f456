"""What trying a culprit costs a GitHub-shaped pass on a real suite (issue 61, ADR 0073).

pluggy 1.7.0's suite is the only branch check, with one more test that fails once the
breaker's file is there. `--lanes` honest lanes and the breaker, all ended, are integrated by
one `imm reconcile` pass (the integrate job's): the top fails, bisection finds the breaker, its
failing test is tried before it is parked, and the lanes above it land. Measured: the pass's
wall, with the breaker's failing test rerun alone (the default) against whole runs of the suite
(its command says `-p no:imm_tests_alone`), one of each in turn; medians. Each task's own
check is `test -f` of its file: the suite is what the trial reruns. `--slow N` adds N tests
of 0.5 s each to the suite: pluggy's own runs in under 2 s, about what pytest takes to start,
where a real suite takes minutes. Needs the package registry once (`pip download`), then works
offline.

    python benchmarks/culprit_trial.py [--lanes 4] [--runs 3] [--slow 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.branch_checks import PYTEST, fetch, write_pluggy  # noqa: E402
from benchmarks.generate import bench_git  # noqa: E402
from benchmarks.github_round import imm  # noqa: E402
from benchmarks.speculative_verification import lanes_ready  # noqa: E402
from imm_action.batches.repo import open_batch_repo  # noqa: E402
from imm_action.carriers.source import Initiatives, NoIssueSource  # noqa: E402
from imm_action.integrate.store import StateStore  # noqa: E402
from imm_action.verify.tests_alone import PLUGIN  # noqa: E402

BREAKER = "brk"
SLUG = "trial"
BROKEN_BY_IT = (
    "import pathlib\n\n\ndef test_no_breaker():\n    assert not pathlib.Path('brk.txt').exists()\n"
)


def slow_tests(count: int) -> str:
    return "import time\n" + "".join(
        f"\n\ndef test_slow_{index}():\n    time.sleep(0.5)\n" for index in range(count)
    )


def write_project(root: Path, source: Path, lanes: int, whole: bool, slow: int = 0) -> list[str]:
    """pluggy with the breaker's test, `lanes` honest tasks and the breaker (in the middle of
    the stack: lanes above it must land too); each task's file is `<task>.txt`."""
    keep_out = ["-p", f"no:{PLUGIN}"] if whole else []
    suite = shlex.join(["python3", *PYTEST, *keep_out, "testing"])
    config = (
        f"max_parallel: {lanes + 1}\nheld_checks: branch\nbranch_checks:\n  - name: suite\n"
        f"    command: {suite!r}\n"
    )
    tasks = [f"t{index}" for index in range(lanes)]
    tasks.insert(lanes // 2, BREAKER)
    reviews = {task: (f"{task}.txt", f"{task}.txt", ()) for task in tasks}
    write_pluggy(root, source, config, reviews, SLUG)
    (root / "testing" / "test_zz_breaker.py").write_text(BROKEN_BY_IT)
    if slow:
        (root / "testing" / "test_zz_slow.py").write_text(slow_tests(slow))
    for task in tasks:  # each task's own check: its file is there (`test -f`)
        intent = root / "docs" / "plans" / f"{task}.intent.json"
        data = json.loads(intent.read_text())
        check = json.loads(data["acceptance"][0]["verification"])  # a descriptor's text
        check["command"] = {"executable": "test", "argv": ["-f", f"{task}.txt"],
                            "timeout_ms": 60000}  # fmt: skip
        data["acceptance"][0]["verification"] = json.dumps(check)
        intent.write_text(json.dumps(data))
    bench_git(root, "add", "-A")
    bench_git(root, "commit", "-qm", "the breaker's test; each task's check tests its file")
    return tasks


def run_once(
    source: Path, lanes: int, whole: bool, slow: int
) -> tuple[float, tuple[str, ...], int]:
    """One pass: its wall, what it parked, what it landed."""
    scratch = Path(tempfile.mkdtemp(prefix="imm-trial-"))
    try:
        repo = scratch / "repo"
        tasks = write_project(repo, source, lanes, whole, slow)
        imm(ROOT / "src", repo, "reconcile", SLUG, "--admit")
        lanes_ready(repo, tasks, slug=SLUG)
        started = time.perf_counter()
        imm(ROOT / "src", repo, "reconcile", SLUG)
        wall = time.perf_counter() - started
        batch_repo = open_batch_repo(repo, None, Initiatives(repo, NoIssueSource()))
        [stored] = StateStore(batch_repo.refs).all_batches()
        children = stored.state.children
        parked = tuple(c.task_id for c in children if c.state == "needs_human")
        landed = sum(1 for c in children if c.state == "integrated")
        return wall, parked, landed
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=4, help="honest lanes beside the breaker")
    parser.add_argument("--runs", type=int, default=3, help="passes of each; medians printed")
    parser.add_argument("--slow", type=int, default=0, help="tests of 0.5 s added to the suite")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "imm-pluggy")
    args = parser.parse_args()
    source = fetch(args.cache)
    # this interpreter first on the PATH checks get (it has pytest), as branch_checks.py does
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"pluggy 1.7.0's suite (and {args.slow} tests of 0.5 s), {args.lanes} honest lanes "
          "and a breaker, one reconcile pass")  # fmt: skip
    found: dict[bool, list[float]] = {False: [], True: []}
    for run in range(args.runs):
        for whole in (False, True):  # alternated: a drifting load hits both alike
            wall, parked, landed = run_once(source, args.lanes, whole, args.slow)
            if parked != (BREAKER,) or landed != args.lanes:
                raise SystemExit(f"expected the breaker parked alone: {parked}, {landed} landed")
            found[whole].append(wall)
            print(f"  {'whole' if whole else 'alone'}: pass {wall:.1f} s   (run {run + 1})",
                  flush=True)  # fmt: skip
    alone, whole = (statistics.median(found[mode]) for mode in (False, True))
    print(f"medians: alone {alone:.1f} s, whole {whole:.1f} s ({whole / alone:.2f}x)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
