"""What the test ledger costs (issue 58, SPEC §9: ≤ 20 ms a check run at 2,000 tests; a whole
real-library batch ≤ 5 % slower with it than without).

1. Per check run: pytest writes its JUnit XML for a module of 2,000 tests (as imm asks it to,
   through PYTEST_ADDOPTS); imm reads it into a ledger and compares it with the head's, once
   where nothing was lost and once where one test vanished. Median of `--repeat`; printed
   beside the pytest run that wrote the report, measured in the same run.
2. A whole batch: pluggy 1.7.0's 12-task initiative of `benchmarks/branch_checks.py` (its
   suite the branch check, `held_checks: branch`), run with the ledger and without it —
   the same `imm run`, its ledger switched off in-process (no report asked for, none read) —
   alternated, medians of `--runs`.

    python benchmarks/ledger.py [--repeat 50] [--runs 3] [--seconds 2] [--skip-batch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.branch_checks import fetch, timed_run, write_project  # noqa: E402
from imm_action.integrate.ledger import lost_tests  # noqa: E402
from imm_action.ledger.read import read_report  # noqa: E402

TESTS = 2000
MODULE = (
    "import pytest\n\n\n"
    f"@pytest.mark.parametrize('n', range({TESTS - 2}))\n"
    "def test_value(n):\n    assert n >= 0\n\n\n"
    "class TestPair:\n    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n"
)

# `imm run` with its ledger off: no report asked for, none read (the baseline of part 2)
WITHOUT_LEDGER = (
    "import sys\n"
    "import imm_action.verify.command_run as sandbox\n"
    "sandbox.ledger_environment = lambda folder: ()\n"
    "sandbox.run_ledger = lambda *args, **kwargs: None\n"
    "from imm_action.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _median_ms(work: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def per_check_run(repeat: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="imm-ledger-"))
    try:
        (scratch / "tests").mkdir()
        (scratch / "tests" / "test_many.py").write_text(MODULE)
        report = scratch / "report.xml"
        env = {**os.environ, "PYTEST_ADDOPTS": f"--junitxml={report} -o junit_family=xunit1"}
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:hypothesispytest", "tests"], cwd=scratch, env=env,
                       check=True, capture_output=True)  # fmt: skip
        pytest_ms = (time.perf_counter() - started) * 1000
        data = report.read_bytes()
        head = read_report(data)
        if head is None or len(head.tests) != TESTS:
            raise SystemExit(f"pytest reported other tests than {TESTS}")
        lost_one = data.replace(b'name="test_a"', b'name="test_renamed"')

        def whole() -> None:
            assert not lost_tests(head, read_report(data))

        def one_lost() -> None:
            assert lost_tests(head, read_report(lost_one)) == [
                "tests/test_many.py::TestPair::test_a (missing)"
            ]

        kept, lost = _median_ms(whole, repeat), _median_ms(one_lost, repeat)
        print(f"ledger of {TESTS} tests ({len(data) / 1024:.0f} KiB of JUnit XML), read and "
              f"compared with the head's, median of {repeat}:")  # fmt: skip
        print(f"  nothing lost   {kept:6.2f} ms   (goal <= 20 ms)")
        print(f"  one test lost  {lost:6.2f} ms")
        print(f"  the pytest run that wrote it: {pytest_ms:.0f} ms; the ledger adds "
              f"{kept / pytest_ms:.1%} of it")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def batch_once(source: Path, seconds: float, ledger: bool) -> float:
    scratch = Path(tempfile.mkdtemp(prefix="imm-ledger-batch-"))
    try:
        repo = scratch / "repo"
        write_project(repo, source, "branch")
        program = () if ledger else ("-c", WITHOUT_LEDGER)
        return timed_run(repo, scratch, seconds, f"ledger {ledger}", program)[1]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def whole_batch(cache: Path, runs: int, seconds: float) -> None:
    source = fetch(cache)
    print(f"pluggy 1.7.0, 12 tasks on 3 lanes, executors {seconds} s each, its suite the branch "
          "check (held_checks: branch):")  # fmt: skip
    walls: dict[bool, list[float]] = {True: [], False: []}
    for run in range(runs):
        for ledger in (False, True):  # alternated: a drifting load hits both alike
            walls[ledger].append(batch_once(source, seconds, ledger))
            print(f"  run {run + 1}: {'with' if ledger else 'without'} the ledger "
                  f"{walls[ledger][-1]:6.2f} s", flush=True)  # fmt: skip
    without, with_ = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"  medians: without {without:.2f} s, with {with_:.2f} s: ratio {with_ / without:.3f} "
          "(goal <= 1.05)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="reads of the report")
    parser.add_argument("--runs", type=int, default=3, help="batches of each; medians")
    parser.add_argument("--seconds", type=float, default=2.0, help="each executor's time")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "imm-pluggy")
    parser.add_argument("--skip-batch", action="store_true", help="part 1 only")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    per_check_run(args.repeat)
    if not args.skip_batch:
        whole_batch(args.cache, args.runs, args.seconds)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
