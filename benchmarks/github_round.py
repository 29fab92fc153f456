"""One GitHub-shaped round, driven through the CLI as the batch workflow drives it (issue 22).

`imm reconcile --admit` admits N lanes from one base; the N lanes end (each commits its task's
file and publishes its outcome, as `imm lane` does); then one `imm reconcile` pass — the
integrate job's — integrates them. Every task has a check of its own that sleeps `--seconds`
(the shape users have: a shared check, which the cache runs once per tree, hides the cost).
With `--interfering 2`, one lane's own check fails once an earlier sibling is there, and
another lane breaks an earlier sibling's check.

Printed per round: descriptor runs, the pass's wall time, what landed and what was parked. The
baseline, measured in the same run, is the per-candidate integrator of `--baseline-rev` (the
commit before stack verification), run from a worktree of this repository on the same project:
every candidate re-ran its own check and those of the siblings landed since its base.

    python benchmarks/github_round.py [--sizes 24,64,256] [--seconds 1.0] [--repeat 3]
        [--baseline-sizes 24] [--baseline-rev 29ba8bb]
    python benchmarks/github_round.py --act 12 [--repeat 3]
    python benchmarks/github_round.py --act-fan-out 32 --seconds 10 [--runners 8] [--repeat 3]
    python benchmarks/github_round.py --sizes 24 --repeat 3 --against 6ef7cb5

`--act N` runs the round under act instead, with the shipped workflows (host mode, the fake
GitHub; tests/e2e): N lane jobs, one integrate job, and prints the integrate job's `imm
reconcile` step, beside the same round with the baseline's shipped files in the same run.
`--act-fan-out N` runs a round of N lanes under act twice, its checks verified on `--runners`
verify jobs (issue 32, decision 0054) and on the integrating runner alone (`verify_runners: 0`),
and prints the round's verification, from the stack built to the last task landed.
`--against REV` runs rounds with two interfering lanes by this tree and by REV, alternated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import own_check, scratch_with_repo, write_project  # noqa: E402
from benchmarks.speculative_verification import lanes_ready  # noqa: E402
from imm_action.batches.repo import open_batch_repo  # noqa: E402
from imm_action.carriers.source import Initiatives, NoIssueSource  # noqa: E402
from imm_action.integrate.store import StateStore  # noqa: E402

VERIFY_PARALLEL = 4


@dataclass(frozen=True)
class Round:
    size: int
    interfering: int
    seconds: float


@dataclass(frozen=True)
class Figures:
    wall: float
    runs: int
    integrated: int
    parked: tuple[str, ...]


def interference(size: int, interfering: int) -> dict[str, str]:
    """Per task whose check breaks: the file of the lane that breaks it."""
    if interfering == 0:
        return {}
    # the first culprit's own check fails once an earlier sibling is there; the second
    # breaks an earlier sibling's check
    return {
        f"t{3 * size // 8:03d}": f"t{size // 8:03d}",
        f"t{size // 4:03d}": f"t{3 * size // 4:03d}",
    }


def make_project(root: Path, spec: Round, runs: Path) -> list[str]:
    tasks = [f"t{index:03d}" for index in range(spec.size)]
    breaks = interference(spec.size, spec.interfering)
    checks = {
        task: own_check(
            task, f"sleep {spec.seconds}; echo {task} >> {runs}", breaks.get(task), 600000
        )
        for task in tasks
    }
    config = f"max_parallel: {spec.size}\nverify_parallel: {VERIFY_PARALLEL}\n"
    write_project(root, "round", {task: [] for task in tasks}, checks, config=config)
    return tasks


def imm(src: Path, repo: Path, *args: str) -> dict[str, object]:
    """`imm` of the source tree `src`, as the integrate job runs it; the checks may write the
    run log beside the repository (the operator's writable folder: the sandbox shows nothing
    else of /tmp)."""
    env = {**os.environ, "PYTHONPATH": str(src), "IMM_SANDBOX_WRITABLE": str(repo.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", *args, "--repo", str(repo), "--format", "json"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(f"imm {' '.join(args)} exited {done.returncode}: {done.stderr}")
    report: dict[str, object] = json.loads(done.stdout)
    return report


def measure(src: Path, spec: Round) -> Figures:
    scratch, repo, runs = scratch_with_repo("imm-round-", "runs.txt")
    try:
        tasks = make_project(repo, spec, runs)
        imm(src, repo, "reconcile", "round", "--admit")
        lanes_ready(repo, tasks, slug="round")
        started = time.perf_counter()
        imm(src, repo, "reconcile", "round")
        wall = time.perf_counter() - started
        batch_repo = open_batch_repo(repo, None, Initiatives(repo, NoIssueSource()))
        [stored] = StateStore(batch_repo.refs).all_batches()
        children = stored.state.children
        integrated = sum(1 for child in children if child.state == "integrated")
        parked = tuple(c.task_id for c in children if c.state == "needs_human")
        return Figures(wall, len(runs.read_text().splitlines()), integrated, parked)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def baseline_tree(rev: str) -> Path | None:
    """A worktree of `rev`, the per-candidate integrator; None outside a clone holding it."""
    where = Path(tempfile.mkdtemp(prefix="imm-baseline-")) / "tree"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where), rev],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return where if done.returncode == 0 else None


def median_of(src: Path, spec: Round, repeat: int) -> tuple[Figures, list[float]]:
    figures = sorted((measure(src, spec) for _ in range(repeat)), key=lambda f: f.wall)
    return figures[len(figures) // 2], [f.wall for f in figures]


ACT_STEP = re.compile(
    r"^\[imm-batch/(?P<job>[^\]]+)\]\s+\S+\s+(?:Success|Failure) - Main "
    r"(?P<step>.+?) \[(?P<took>[^\]]+)\]$"
)
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)")
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def act_round(project: Path, size: int, seconds: float) -> tuple[float, float]:
    """The integrate job's `imm reconcile` step and the median lane job's lane step (seconds)
    of one round of `size` lanes under act, each task with a check of its own sleeping
    `seconds`; `project`: whose shipped files (action, workflows, src) the repository holds."""
    from tests.conftest import descriptor
    from tests.e2e import act_world
    from tests.e2e.act_world import TOKEN, ActWorld
    from tests.fake_github import FakeGitHub
    from tests.git_http_remote import GitHttpRemote

    tasks = {f"t{index:02d}": [] for index in range(size)}
    checks = {
        task: descriptor(["-c", f"sleep {seconds}; test -e {task}.txt"], executable="sh")
        for task in tasks
    }
    root = Path(tempfile.mkdtemp(prefix="imm-act-round-"))
    shipped, act_world.PROJECT = act_world.PROJECT, project
    try:
        with (
            GitHttpRemote(root / "git-host", token=TOKEN) as host,
            FakeGitHub(tokens={TOKEN: "github-actions[bot]"}) as github,
        ):
            world = ActWorld(root / "world", root / "home", host, github)
            world.create(tasks, "round", checks=checks)
            world.dispatch({"initiative": "round", "max_parallel": str(size)})
            runs = world.run_dispatches()
    finally:
        act_world.PROJECT = shipped
        shutil.rmtree(root, ignore_errors=True)
    if not runs or runs[0].exit_code != 0:
        raise SystemExit(f"the round failed under act: {runs[-1].log[-3000:] if runs else ''}")
    integrate, lanes = None, []
    for line in runs[0].log.splitlines():
        found = ACT_STEP.match(line.strip())
        if not found:
            continue
        took = sum(float(n) * UNITS[u] for n, u in GO_DURATION.findall(found["took"]))
        if found["job"].strip() == "integrate" and found["step"] == "imm reconcile":
            integrate = took
        elif found["job"].startswith("imm lane") and found["step"].startswith("Run the lane"):
            lanes.append(took)
    if integrate is None:
        raise SystemExit("no `imm reconcile` step in the integrate job's log")
    # the old shipped files may name the lane step otherwise: no lane figure then
    return integrate, statistics.median(lanes) if lanes else float("nan")


STACK_STEP_END = re.compile(r"^\[imm-batch/imm stack\s*\]\s+\S+\s+Success - Main imm stack ")
INTEGRATED = re.compile(
    r"^\[imm-batch/(?P<job>[^\]]+?)\s*\]\s+\|\s+imm: integrated (?P<task>\S+) as "
)


def act_fan_out_round(size: int, seconds: float, runners: int) -> tuple[float, int, int]:
    """One round of `size` lanes under act, each task's own check sleeping `seconds`, with the
    shipped workflows as they are: `runners` verify runners (0: the integrating runner verifies
    the whole stack), every runner running 2 checks at once (`verify_parallel: 2`, a 2-core
    hosted runner with checks that compute), act running every job side by side as GitHub
    does. Returns the round's verification — from the stack job's step ending (the stack built,
    its shards recorded) to the last task landing — the tasks landed, and the verify jobs run."""
    from tests.conftest import descriptor
    from tests.e2e.act_world import TOKEN, ActWorld
    from tests.fake_github import FakeGitHub
    from tests.git_http_remote import GitHttpRemote

    tasks = {f"t{index:02d}": [] for index in range(size)}
    checks = {
        task: descriptor(["-c", f"sleep {seconds}; test -e {task}.txt"], executable="sh")
        for task in tasks
    }
    config = f"verify_parallel: 2\nverify_runners: {runners}\nlane_timeout_minutes: 30\n"
    root = Path(tempfile.mkdtemp(prefix="imm-act-fan-out-"))
    try:
        with (
            GitHttpRemote(root / "git-host", token=TOKEN) as host,
            FakeGitHub(tokens={TOKEN: "github-actions[bot]"}) as github,
        ):
            world = ActWorld(root / "world", root / "home", host, github)
            world.concurrent_jobs = 2 * size + 16
            world.act_timeout_s = 3600
            world.timeline = []
            world.create(tasks, "round", checks=checks, config=config)
            world.dispatch({"initiative": "round", "max_parallel": str(size)})
            runs = world.run_dispatches()
            log = world.remote("log", "--format=%s", "refs/heads/imm/round")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not runs or runs[0].exit_code != 0:
        raise SystemExit(f"the round failed under act: {runs[-1].log[-3000:] if runs else ''}")
    assert world.timeline is not None
    built = next((t for t, line in world.timeline if STACK_STEP_END.match(line.strip())), None)
    landed = [t for t, line in world.timeline if INTEGRATED.match(line.strip())]
    if built is None or not landed:
        raise SystemExit("the round's log has no stack step or no integration")
    once = sum(1 for task in tasks if log.count(f"imm({task})") == 1)
    verify_jobs = sum(1 for job in runs[0].jobs if job.startswith("imm verify "))
    return max(landed) - built, once, verify_jobs


def report_fan_out(size: int, seconds: float, runners: int, repeat: int) -> None:
    print(
        f"under act: {size} lanes, each task's own check sleeps {seconds} s "
        f"({size * seconds:.0f} check-seconds), every runner 2 checks at once"
    )
    for name, count in (("one runner", 0), (f"{runners} verify runners", runners)):
        rounds = [act_fan_out_round(size, seconds, count) for _ in range(repeat)]
        walls = [wall for wall, _, _ in rounds]
        print(
            f"{name:<18} verification {statistics.median(walls):6.1f}s   ("
            + ", ".join(f"{wall:.1f}" for wall in walls)
            + ")   landed once: "
            + ", ".join(str(once) for _, once, _ in rounds)
            + f" of {size}   verify jobs: "
            + ", ".join(str(jobs) for _, _, jobs in rounds),
            flush=True,
        )


def report_act(size: int, seconds: float, repeat: int, baseline_rev: str | None) -> None:
    print(f"under act: {size} lanes, each task's own check sleeps {seconds} s")
    old = baseline_tree(baseline_rev) if baseline_rev else None
    try:
        for name, project in (("per-candidate", old), ("stack", ROOT)):
            if project is None:
                continue
            rounds = [act_round(project, size, seconds) for _ in range(repeat)]
            steps = [integrate for integrate, _ in rounds]
            lanes = [lane for _, lane in rounds]
            ratios = [integrate / lane for integrate, lane in rounds]
            print(
                f"{name:<14} integrate step {statistics.median(steps):6.1f}s   lane step "
                f"{statistics.median(lanes):5.1f}s   integrate/lane "
                f"{statistics.median(ratios):4.2f}x   (integrate: "
                + ", ".join(f"{step:.1f}" for step in steps)
                + "; lane: "
                + ", ".join(f"{lane:.1f}" for lane in lanes)
                + ")",
                flush=True,
            )
    finally:
        if old is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           check=False, capture_output=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="24,64,256")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="median of this many rounds")
    parser.add_argument("--baseline-sizes", default="24", help="'' for none: N² runs")
    parser.add_argument("--baseline-rev", default="29ba8bb")
    parser.add_argument("--act", type=int, help="a round of this many lanes under act instead")
    parser.add_argument(
        "--act-fan-out", type=int, metavar="N",
        help="a round of N lanes under act, verified on --runners verify runners and on one",
    )  # fmt: skip
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument(
        "--against", metavar="REV",
        help="rounds of --sizes with two interfering lanes, this tree against REV, alternated",
    )  # fmt: skip
    args = parser.parse_args()
    if args.against:
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        report_against(args.against, [int(n) for n in args.sizes.split(",")], args.seconds,
                       args.repeat)  # fmt: skip
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0
    if args.act_fan_out:
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        report_fan_out(args.act_fan_out, args.seconds, args.runners, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0
    if args.act:
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        # the baseline's shipped files under today's act world: '' for none
        report_act(args.act, args.seconds, args.repeat, args.baseline_rev or None)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0
    sizes = [int(size) for size in args.sizes.split(",") if size]
    baseline_sizes = {int(size) for size in args.baseline_sizes.split(",") if size}
    print(
        f"GitHub-shaped round: N lanes admitted from one base, one integrating pass; each task's "
        f"own check sleeps {args.seconds} s; verify_parallel {VERIFY_PARALLEL}"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(
        f"{'integrator':<14} {'N':>4} {'interf.':>7} {'pass wall':>9} {'runs':>6} "
        f"{'runs/lane':>9} {'landed':>6} {'parked':<16} {'vs per-candidate':>16}"
    )
    old = baseline_tree(args.baseline_rev) if baseline_sizes else None
    try:
        for size in sizes:
            for interfering in (0, 2):
                spec = Round(size, interfering, args.seconds)
                base: Figures | None = None
                if old is not None and size in baseline_sizes:
                    base, walls = median_of(old / "src", spec, 1)
                    report("per-candidate", spec, base, walls, None)
                now, walls = median_of(ROOT / "src", spec, args.repeat)
                report("stack", spec, now, walls, base)
    finally:
        if old is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           check=False, capture_output=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def report_against(rev: str, sizes: list[int], seconds: float, repeat: int) -> None:
    """Rounds with two interfering lanes by this tree and by `rev`, one of each in turn (a
    drifting load falls on both alike): what a change of the integrator does to a round."""
    old = baseline_tree(rev)
    if old is None:
        raise SystemExit(f"no worktree of {rev}")
    try:
        for size in sizes:
            spec = Round(size, 2, seconds)
            found: dict[str, list[Figures]] = {rev: [], "this tree": []}
            for _ in range(repeat):
                found[rev].append(measure(old / "src", spec))
                found["this tree"].append(measure(ROOT / "src", spec))
            for name, figures in found.items():
                ranked = sorted(figures, key=lambda f: f.wall)
                report(name, spec, ranked[len(ranked) // 2], [f.wall for f in ranked], None)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       check=False, capture_output=True)  # fmt: skip


def report(name: str, spec: Round, got: Figures, walls: list[float], base: Figures | None) -> None:
    ratio = f"{base.runs / got.runs:5.1f}x runs {base.wall / got.wall:5.1f}x wall" if base else ""
    spread = ", ".join(f"{wall:.1f}" for wall in walls)
    print(
        f"{name:<14} {spec.size:>4} {spec.interfering:>7} {got.wall:8.1f}s {got.runs:>6} "
        f"{got.runs / spec.size:>9.2f} {got.integrated:>6} {','.join(got.parked) or '-':<16} "
        f"{ratio:>16}   (walls: {spread}; median {statistics.median(walls):.1f})",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
