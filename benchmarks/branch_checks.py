"""A real library's own suite as the only branch check (issue 44, ADR 0061): pluggy 1.7.0 as
published (its `testing/` suite; the version pytest itself imports here, so the suite tests what
it runs against), 12 tasks on 3 lanes, each task judged by a slice of the suite
(one test file), the whole suite as `branch_checks`; run once with `held_checks: branch` and
once with `all`, in the same run. Printed for each: the integrator's check runs per move of the
branch (a move: one verified stack), the lanes' own check runs, and verification's share of the
wall time (the time from the last lane of a stack ending to the stack verified, summed, over
the run's wall time). Needs the package registry once (`pip download`), then works offline.

    python benchmarks/branch_checks.py [--seconds 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.generate import bench_git, command_check  # noqa: E402

PACKAGE = "pluggy==1.7.0"
TESTS = ("details", "helpers", "hookcaller", "invocations", "multicall", "pluginmanager",
         "tracer", "warnings")  # fmt: skip
# four more tasks, each reviewing a module, judged by the test file that exercises it
MODULES = {"hooks": ("src/pluggy/_hooks.py", "hookcaller"),
           "manager": ("src/pluggy/_manager.py", "pluginmanager"),
           "callers": ("src/pluggy/_callers.py", "multicall"),
           "result": ("src/pluggy/_result.py", "invocations")}  # fmt: skip
PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]


def fetch(cache: Path) -> Path:
    """pluggy's sdist, unpacked in `cache` (downloaded once)."""
    found = list(cache.glob("pluggy-1.7.0"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", PACKAGE, "--no-binary", ":all:",
                    "--no-deps", "-q", "-d", str(cache)], check=True)  # fmt: skip
    with tarfile.open(next(cache.glob("pluggy-*.tar.gz"))) as archive:
        archive.extractall(cache, filter="data")
    return cache / "pluggy-1.7.0"


def tasks() -> dict[str, tuple[str, str]]:
    """task -> (the file it reviews, the test file judging it)."""
    found = {f"test_{name}": (f"testing/test_{name}.py", name) for name in TESTS}
    found.update({f"mod_{name}": pair for name, pair in MODULES.items()})
    return found


def write_project(root: Path, source: Path, held: str) -> None:
    python = "python3"  # this interpreter's, first on the run's PATH (it has pytest)
    suite = shlex.join([python, *PYTEST, "testing"])
    config = (
        f"max_parallel: 3\nheld_checks: {held}\nbranch_checks:\n  - name: suite\n"
        f"    command: {suite!r}\n"
    )
    reviews = {
        task: (path, f"testing/test_{test}.py", ()) for task, (path, test) in tasks().items()
    }
    write_pluggy(root, source, config, reviews, "review")


def write_pluggy(
    root: Path,
    source: Path,
    config: str,
    reviews: dict[str, tuple[str, str, tuple[str, ...]]],
    slug: str,
) -> None:
    """pluggy's sources as a repository with `config` as `.github/imm.yml` and one initiative
    `slug` of `reviews` (task -> the file it reviews, the test file judging it, the tasks it
    is blocked by), committed on `main`."""
    shutil.copytree(source, root)
    (root / "conftest.py").write_text(
        "import pathlib, sys\nsys.path.insert(0, str(pathlib.Path(__file__).parent / 'src'))\n"
    )
    (root / ".github").mkdir(exist_ok=True)
    (root / ".github/imm.yml").write_text(config)
    plans, initiatives = root / "docs/plans", root / "docs/initiatives"
    plans.mkdir(parents=True)
    initiatives.mkdir(parents=True)
    lines = [f"# {slug}", ""]
    for task, (path, test_file, needs) in reviews.items():
        lines += [f"## s-{task}: {task}", "Tasks:", f"- {task}"]
        lines += [f"Blocked by: {', '.join(needs)}"] if needs else []
        check = command_check({"executable": "python3", "argv": [*PYTEST, test_file]})
        intent = {
            "contract": "assurance_kernel/task_intent/v1", "task_id": task,
            "goal": f"Review {path}", "scope_hint": [path], "risk": "routine", "revision": 1,
            "owner": "user",
            "acceptance": [{"id": "ok", "assertion": "its tests pass", "verification": check}],
        }  # fmt: skip
        (plans / f"{task}.intent.json").write_text(json.dumps(intent))
    (initiatives / f"{slug}.md").write_text("\n".join(lines) + "\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "pluggy"]):
        bench_git(root, *args)


def executor(scratch: Path, seconds: float) -> str:
    """Reviews its file: waits (the agent's time), then adds a comment line to it."""
    paths = {task: path for task, (path, _) in tasks().items()}
    script = scratch / "review.py"
    script.write_text(
        "import os, pathlib, time\n"
        f"paths = {paths!r}\n"
        f"time.sleep({seconds})\n"
        "p = pathlib.Path(paths[os.environ['IMM_TASK_ID']])\n"
        "p.write_text(p.read_text() + '# reviewed\\n')\n"
    )
    return shlex.join([sys.executable, str(script)])


_STAMP = re.compile(r"^imm \[\s*([0-9.]+)s\]: (.*)$")
_STACK = re.compile(r"verified (\d+) lanes? as one stack \(([^)]*)\): (\d+) check runs?")


def measure(log: str, wall: float) -> dict[str, float]:
    moves = runs = 0
    verifying = 0.0
    last_end = at = 0.0
    for line in log.splitlines():
        found = _STAMP.match(line)
        if not found:
            continue
        at, said = float(found.group(1)), found.group(2)
        if " ended (" in said and said.startswith("lane "):
            last_end = at
        stack = _STACK.search(said)
        if stack:
            moves += 1
            runs += int(stack.group(3))
            verifying += max(0.0, at - last_end)
    # on the critical path: lanes never wait for integration (a lane that ended frees its slot
    # at once), so what verification adds to it is the tail from the last lane's end to the
    # batch's last line
    return {"moves": moves, "runs": runs, "per_move": runs / max(moves, 1),
            "share": verifying / wall, "tail": max(0.0, at - last_end) / max(at, 1e-9),
            "wall": wall}  # fmt: skip


def timed_run(
    repo: Path, scratch: Path, seconds: float, what: str, program: tuple[str, ...] = ()
) -> tuple[str, float]:
    """`imm run review` on `repo` (`program`: how Python starts imm; default `-m imm_action`)
    with this interpreter first on PATH (it has pytest): its log and its wall time."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *(program or ("-m", "imm_action")), "run", "review",
         "--repo", str(repo), "--executor", executor(scratch, seconds)],
        capture_output=True, text=True, check=False,
        env={**os.environ,
             "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"imm run failed ({what}):\n{done.stdout}\n{done.stderr}")
    return done.stderr, wall


def run_once(source: Path, held: str, seconds: float) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="imm-branch-"))
    try:
        repo = scratch / "repo"
        write_project(repo, source, held)
        return measure(*timed_run(repo, scratch, seconds, held))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _row(held: str, got: dict[str, float]) -> str:
    # with `all` a move also reruns every task the branch holds: no such simple floor
    floor = f"{len(tasks()) + got['moves']:.0f}" if held == "branch" else "-"
    return (f"{held:>12} {got['moves']:6.0f} {got['runs']:5.0f} {floor:>6} "
            f"{got['per_move']:10.2f} {got['share']:12.0%} {got['tail']:13.0%} "
            f"{got['wall']:6.1f}s")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="each executor's time")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "imm-pluggy")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; medians printed")
    args = parser.parse_args()
    source = fetch(args.cache)
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"pluggy 1.7.0, 12 tasks on 3 lanes, executors {args.seconds} s each; the suite as the "
          "only branch check")  # fmt: skip
    # the floor of `branch`: each lane's own checks once on a tree the integrator built, and
    # the branch checks once per move (ADR 0061) — runs can meet it, never go under it
    print(f"{'held_checks':>12} {'moves':>6} {'runs':>5} {'floor':>6} {'runs/move':>10} "
          f"{'verify share':>13} {'on crit. path':>14} {'wall':>7}")  # fmt: skip
    medians = {}
    for run in range(args.runs):
        for held in ("branch", "all"):  # alternated: a drifting load hits both alike
            got = run_once(source, held, args.seconds)
            medians.setdefault(held, []).append(got)
            print(f"{_row(held, got)}   (run {run + 1})", flush=True)
    print("medians:")
    for held, runs in medians.items():
        got = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        landed = got["runs"] / len(tasks())
        print(f"{_row(held, got)}   ({landed:.2f} runs a landed lane)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
