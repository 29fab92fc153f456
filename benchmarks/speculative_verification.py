"""Stack verification held to a figure (issues 13 and 22, SPEC §5.4, §9).

Several lanes are ready at once; each check sleeps 1 s. One reconcile pass builds their
candidates one on another and verifies them as one stack: the united checks once, on the top's
tree, `verify_parallel` at a time. Sequential (`verify_parallel: 1`) is the baseline measured in
the same run; one worker per core is the default. For each setting it prints the pass's wall
time, the wall time beyond the checks' own, the descriptor runs, the trees they ran on, the
final tree and the parked tasks, which must be the same for every setting. Then the second
lane's check fails: bisection finds it, it is parked, and the stack is verified again without
it.

Two shapes of checks, each measured: `shared`, every task's acceptance is the project's one
check (one descriptor: the stack runs it once), and `per-task`, a descriptor of each task's own
(the shape users have: the stack runs each once, `lanes` runs where per-candidate verification
ran lanes x (lanes + 1) / 2).

    python benchmarks/speculative_verification.py [--lanes 4] [--seconds 1.0]
        [--checks shared|per-task|both]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import bench_git, scratch_with_repo, write_project  # noqa: E402
from imm_action.batches.pass_inputs import pass_ports, pass_request  # noqa: E402
from imm_action.batches.repo import open_batch_repo  # noqa: E402
from imm_action.carriers.source import Initiatives, NoIssueSource  # noqa: E402
from imm_action.integrate.store import StateStore  # noqa: E402
from imm_action.lanes.outcome import publish_outcome  # noqa: E402
from imm_action.model.outcome import OUTCOME_CONTRACT, LaneOutcome  # noqa: E402
from imm_action.passes.driver import PassResult, reconcile  # noqa: E402


def git(repo: Path, *args: str, index: str | None = None, stdin: str | None = None) -> str:
    return bench_git(repo, *args, index=index, stdin=stdin).strip()


def make_project(root: Path, tasks: list[str], parallel: int | None, setup: Setup) -> None:
    config = f"max_parallel: {len(tasks)}\n" + (
        f"verify_parallel: {parallel}\n" if parallel else ""
    )
    checks = {}
    for task in tasks:
        # each run logs which lanes' files its tree holds: that names the candidate
        script = f"sleep {setup.seconds}; echo $(ls t*.txt) >> {setup.runs}; "
        if setup.shared:  # one check for the whole project: it fails on the failing lane's file
            script += f"test ! -e {setup.failing}.txt" if setup.failing else "true"
        else:
            # the task's name makes each descriptor its own (identical ones run once per tree)
            script += f"exit {1 if task == setup.failing else 0}  # the check of {task}"
        checks[task] = {"executable": "sh", "argv": ["-c", script], "timeout_ms": 60000}
    write_project(root, "bench", {task: [] for task in tasks}, checks, config=config)


def one_pass(repo: Path) -> PassResult:
    batch_repo = open_batch_repo(repo, None, Initiatives(repo, NoIssueSource()))
    request = pass_request(batch_repo, "bench", batch_id=None, admit=True)
    ports = pass_ports(batch_repo, lambda line: None, path_env=os.environ["PATH"])
    return reconcile(request, ports)


def lanes_ready(repo: Path, tasks: list[str], slug: str = "bench") -> None:
    """Every admitted lane does its work and publishes its outcome, as a lane would."""
    batch_repo = open_batch_repo(repo, None, Initiatives(repo, NoIssueSource()))
    [stored] = StateStore(batch_repo.refs).all_batches()
    scratch = tempfile.mkdtemp()
    for child in stored.state.children:
        assert child.lane is not None
        index = os.path.join(scratch, child.task_id)
        git(repo, "read-tree", child.lane.base_head, index=index)
        blob = git(repo, "hash-object", "-w", "--stdin", stdin=f"{child.task_id}\n")
        git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{child.task_id}.txt",
            index=index)  # fmt: skip
        tree = git(repo, "write-tree", index=index)
        message = f"imm({child.task_id}): Do it\n\nImmune-Brain-Batch: {stored.state.batch_id}\n"
        commit = git(repo, "commit-tree", tree, "-p", child.lane.base_head, "-m", message)
        outcome = LaneOutcome(
            contract=OUTCOME_CONTRACT, batch_id=stored.state.batch_id, task_id=child.task_id,
            attempt=child.attempts, state="settled", reason=None, qa_failures=0, findings=[],
            lane_commit=commit,
        )  # fmt: skip
        publish_outcome(batch_repo.refs, slug, outcome, "1700000000 +0000")
    shutil.rmtree(scratch)
    assert len(stored.state.children) == len(tasks)


@dataclass(frozen=True)
class Setup:
    seconds: float
    failing: str | None
    runs: Path
    shared: bool


def measure(
    lanes: int, parallel: int | None, seconds: float, failing: str | None, shared: bool
) -> tuple[float, str, list[str], list[str]]:
    tasks = [f"t{index}" for index in range(lanes)]
    scratch, repo, runs = scratch_with_repo("imm-speculative-", "runs.txt")
    try:
        make_project(repo, tasks, parallel, Setup(seconds, failing, runs, shared))
        assert len(one_pass(repo).admitted) == lanes
        lanes_ready(repo, tasks)
        started = time.perf_counter()
        result = one_pass(repo)
        wall = time.perf_counter() - started
        state = result.stored.state
        parked = sorted(c.task_id for c in state.children if c.state == "needs_human")
        # what the batch changed (the base differs by its config line only)
        change = git(repo, "diff-tree", "-r", "main", "imm/bench")
        return wall, change, parked, runs.read_text().splitlines()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="median of this many passes")
    parser.add_argument("--checks", choices=("shared", "per-task", "both"), default="both")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"speculative verification: {args.lanes} ready lanes, checks sleeping {args.seconds} s")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({cores} cores)")
    shapes = ("shared", "per-task") if args.checks == "both" else (args.checks,)
    for shape in shapes:
        report_shape(args.lanes, args.seconds, args.repeat, shape == "shared")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def report_shape(lanes: int, seconds: float, repeat: int, shared: bool) -> None:
    cores = os.cpu_count() or 1
    settings = [("sequential", 1), (f"one per core ({cores})", None), ("verify_parallel 4", 4)]
    if shared:
        # one descriptor: the stack runs it once, on its top
        critical = seconds
        print(f"== one check shared by every task: the stack runs it once ({seconds} s)")
    else:
        # SPEC 5.4: the stack runs every task's check once on its top, `verify_parallel` at a
        # time; with a worker per check they need one check's time
        critical = seconds
        print(f"== a check per task: the stack runs {lanes} checks of {seconds} s on its top")
    print(
        f"{'setting':<22} {'pass wall':>9} {'vs sequential':>13} {'beyond checks':>13} "
        f"{'check runs':>10} {'trees':>10} {'parked':>7}"
    )
    for failing in (None, "t1"):
        if failing:
            print(f"-- the check fails on {failing}'s change:")
        outcomes: set[tuple[str, tuple[str, ...]]] = set()
        baseline: float | None = None
        for name, parallel in settings:
            figures = [measure(lanes, parallel, seconds, failing, shared)
                       for _ in range(repeat)]  # fmt: skip
            walls = sorted(figure[0] for figure in figures)
            figures.sort(key=lambda figure: figure[0])
            wall, _, parked, runs = figures[len(figures) // 2]
            baseline = baseline or wall
            outcomes.update((figure[1], tuple(figure[2])) for figure in figures)
            candidates = len(set(runs))
            print(
                f"{name:<22} {wall:8.2f}s {wall / baseline:13.2f} {wall - critical:12.2f}s "
                f"{len(runs):>10} {candidates:>10} {','.join(parked) or '-':>7}"
                f"   (runs: {', '.join(f'{w:.2f}' for w in walls)})",
                flush=True,
            )
            if failing:
                below = [run for run in runs if run.split() == ["t0.txt"]]
                print(f"{'':<22} the candidate below the failure was checked {len(below)} time(s)")
        print(f"same change landed and same parked set for every setting: {len(outcomes) == 1}")


if __name__ == "__main__":
    raise SystemExit(main())
