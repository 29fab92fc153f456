"""The integrate job's `imm reconcile` step at N lanes whose outcomes arrive as bundles (issue 31).

What `github_round.py --act N` times inside act, without act's own minutes for N lane jobs: a
project of N tasks, each with a trivial check of its own, N lanes admitted through a bare
remote (`imm reconcile --admit --remote origin`), each lane's outcome written as a git bundle as
a lane job uploads it, then, in a fresh clone of the remote (the integrate job's checkout),
`imm reconcile --remote origin --lane-bundles DIR` timed: the bundles checked and pushed, the
stack verified, the branch moved. The baseline, measured in the same run, is the same step of
`--baseline-rev` (before issue 31: one push per bundle), from a worktree of this repository.

    python benchmarks/integrate_bundles.py [--lanes 256] [--repeat 3] [--baseline-rev 50c5097]
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
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import own_check, write_project  # noqa: E402
from benchmarks.github_round import baseline_tree  # noqa: E402
from benchmarks.speculative_verification import lanes_ready  # noqa: E402
from imm_action.batches.repo import open_batch_repo  # noqa: E402
from imm_action.carriers.source import Initiatives, NoIssueSource  # noqa: E402
from imm_action.integrate.store import StateStore  # noqa: E402

SLUG = "round"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def imm(src: Path, repo: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", *args, "--repo", str(repo)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(f"imm {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")


def prepare(src: Path, scratch: Path, lanes: int) -> tuple[Path, Path, str]:
    """The remote with N lanes admitted by `src`'s imm, and the lanes' bundles."""
    scratch.mkdir()
    project, remote, bundles = scratch / "project", scratch / "remote.git", scratch / "bundles"
    project.mkdir()
    tasks = [f"t{index:03d}" for index in range(lanes)]
    checks = {task: own_check(task, "true") for task in tasks}
    write_project(project, SLUG, {task: [] for task in tasks}, checks,
                  config=f"max_parallel: {lanes}\n")  # fmt: skip
    git(scratch, "clone", "-q", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    imm(src, project, "reconcile", SLUG, "--admit", "--remote", "origin")
    git(project, "fetch", "-q", "origin", "+refs/imm/*:refs/imm/*")
    lanes_ready(project, tasks, slug=SLUG)  # outcomes and lane branches, in `project` only
    batch_repo = open_batch_repo(project, None, Initiatives(project, NoIssueSource()))
    [stored] = StateStore(batch_repo.refs).all_batches()
    batch = stored.state.batch_id
    for child in stored.state.children:
        assert child.lane is not None
        folder = bundles / f"imm-lane-{batch}-{child.task_id}-0"
        folder.mkdir(parents=True)
        refs = [f"refs/imm/lanes/{batch}/{child.task_id}",
                f"refs/heads/imm-lane/{SLUG}/{child.task_id}"]  # fmt: skip
        bundle = folder / f"{child.task_id}.bundle"
        git(project, "bundle", "create", "-q", str(bundle), *refs, f"^{child.lane.base_head}")
    return remote, bundles, batch


def step(src: Path, scratch: Path, remote: Path, bundles: Path, batch: str) -> float:
    """One integrate step, in a fresh clone of a copy of the prepared remote."""
    run = Path(tempfile.mkdtemp(prefix="step-", dir=scratch))
    shutil.copytree(remote, run / "remote.git")
    git(run, "clone", "-q", str(run / "remote.git"), str(run / "integrate"))
    started = time.perf_counter()
    imm(src, run / "integrate", "reconcile", SLUG, "--remote", "origin", "--batch-id", batch,
        "--lane-bundles", str(bundles))  # fmt: skip
    took = time.perf_counter() - started
    landed = git(run / "remote.git", "log", "--format=%s", f"refs/heads/imm/{SLUG}").count("imm(")
    if landed != len(list(bundles.iterdir())):
        raise SystemExit(f"{src}: {landed} of {len(list(bundles.iterdir()))} lanes landed")
    shutil.rmtree(run, ignore_errors=True)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-rev", default="50c5097", help="'' for none")
    args = parser.parse_args()
    print(f"integrate step: {args.lanes} lanes, trivial checks, outcomes as bundles")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    scratch = Path(tempfile.mkdtemp(prefix="imm-integrate-bundles-"))
    old = baseline_tree(args.baseline_rev) if args.baseline_rev else None
    try:
        sources = {"baseline": old / "src" if old else None, "now": ROOT / "src"}
        prepared = {
            name: prepare(src, scratch / name, args.lanes)
            for name, src in sources.items()
            if src is not None
        }
        figures: dict[str, list[float]] = {}
        for _ in range(args.repeat):  # interleaved: both see the same machine
            for name, (remote, bundles, batch) in prepared.items():
                src = sources[name]
                assert src is not None
                figures.setdefault(name, []).append(step(src, scratch, remote, bundles, batch))
        for name, steps in figures.items():
            runs = ", ".join(f"{s:.1f}" for s in steps)
            print(f"{name:<9} integrate step {statistics.median(steps):6.1f}s   (runs: {runs})")
        if "baseline" in figures:
            ratio = statistics.median(figures["baseline"]) / statistics.median(figures["now"])
            print(f"baseline / now: {ratio:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if old is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           check=False, capture_output=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
