"""A chain of tasks on GitHub, round after round, as the batch workflow runs it (ADR 0075).

Each workflow run's jobs are played in order, as GitHub would: the plan job (`imm reconcile
--admit --report`), one lane job per admitted task (the agent's time: `--lane` seconds, then its
lane commit, published), the stack job (`--fan-out`), one verify job per shard (`imm verify`,
each in a fresh clone), the bisect job, the integrate job (`--verdicts`). The plan and integrate
jobs of every run share one lock (the workflow's concurrency group). A run starts when a job
dispatches it, on the fake GitHub (tests/fake_github), as GitHub starts one per dispatch; several
runs overlap where the jobs let them. Every task has a check of its own that sleeps `--verify`
seconds (the suite of a real project), and `verify_fan_out_seconds: 0` sends every stack's
checks to verify jobs, as a slow suite does on GitHub.

Printed: the batch wall, from the first dispatch to the batch completed, per hop of the chain,
and the runs it took, for this tree (pipelined rounds: the stack job dispatches the next round,
whose lanes run while its stack is verified) and for REV (one round at a time), alternated in
the same run; with the ideal: the chain's lanes end to end.

    python benchmarks/pipelined_rounds.py [--tasks 4] [--lane 6] [--verify 6] [--repeat 3]
        [--against 67939f9] [--trace]
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
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.generate import write_project  # noqa: E402
from imm_action.github.client import GitHubClient  # noqa: E402
from imm_action.github.transport import build_github  # noqa: E402
from tests.batch_helpers import make_lane_commit, publish  # noqa: E402
from tests.fake_github import FakeGitHub  # noqa: E402

REPO = "acme/widgets"
TOKEN = "bench-token"


def own_check(task: str, seconds: float) -> dict[str, object]:
    """A check of the task's own that takes `seconds` (the suite it stands for)."""
    script = f"sleep {seconds} && test -f {shlex.quote(task + '.txt')}"
    return {"executable": "sh", "argv": ["-c", script], "timeout_ms": 600_000}


@dataclass
class World:
    """The remote, the fake GitHub, and what the runs did."""

    scratch: Path
    src: Path  # the imm tree under test
    github: FakeGitHub
    lane_s: float
    group: threading.Lock = field(default_factory=threading.Lock)
    runs: list[threading.Thread] = field(default_factory=list)
    started: int = 0  # dispatches given a run
    failures: list[str] = field(default_factory=list)
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, job)

    @property
    def remote(self) -> Path:
        return self.scratch / "remote.git"

    def clone(self, name: str) -> Path:
        where = self.scratch / "jobs" / name
        subprocess.run(["git", "clone", "-q", str(self.remote), str(where)], check=True)
        return where

    def imm(self, run_id: int, job: str, *args: str) -> dict[str, str]:
        """One imm step of a job of run `run_id`, in a checkout of its own; its outputs."""
        begun = time.perf_counter()
        checkout = self.clone(f"{run_id}-{job}")
        outputs = checkout.parent / f"{run_id}-{job}.out"
        outputs.touch()
        env = {
            **os.environ, "PYTHONPATH": str(self.src), "GITHUB_ACTIONS": "true",
            "GITHUB_RUN_ID": str(run_id), "GITHUB_RUN_ATTEMPT": "1", "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.github.url, "GITHUB_GRAPHQL_URL": f"{self.github.url}/graphql",
            "GITHUB_TOKEN": TOKEN, "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(checkout.parent / f"{run_id}-{job}.md"),
            "IMM_BATCH_WORKFLOW": "imm-batch.yml", "IMM_SANDBOX_WRITABLE": str(self.scratch),
        }  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "imm_action", *args, "--repo", str(checkout),
             "--remote", "origin"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode not in (0, 1):
            self.failures.append(f"run {run_id} {job}: {done.stderr[-2000:]}")
        self.spans.append((begun, time.perf_counter(), f"run {run_id} {job}"))
        return read_outputs(outputs.read_text())

    def workflow_run(self, run_id: int, inputs: dict[str, str]) -> None:
        self.github.repo(REPO).runs[run_id]["status"] = "in_progress"
        batch = inputs.get("batch_id", "")
        with self.group:
            plan = self.imm(run_id, "plan", "reconcile", "bench", "--report", "--admit",
                            *(["--batch-id", batch] if batch else []))  # fmt: skip
        batch = plan.get("batch-id", batch)
        lanes = [entry["task"] for entry in json.loads(plan.get("matrix", '{"include":[]}'))
                 ["include"]]  # fmt: skip
        workers = [threading.Thread(target=self.lane, args=(run_id, t)) for t in lanes]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if not batch:
            self.end(run_id)
            return
        on = ["--batch-id", batch]
        stack = self.imm(run_id, "stack", "reconcile", "bench", "--report", "--fan-out", *on)
        verdicts = self.scratch / "verdicts" / str(run_id)
        self.verify_jobs(run_id, batch, stack, verdicts)
        if stack.get("has-verify") == "true":
            bisect = self.imm(run_id, "bisect", "reconcile", "bench", "--report", "--fan-out",
                              "--verdicts", str(verdicts), *on)  # fmt: skip
            self.verify_jobs(run_id, batch, bisect, verdicts)
        asked = ["--next-round-asked"] if stack.get("next-round") == "true" else []
        with self.group:
            job = self.github.add_job(REPO, run_id, "integrate")
            self.github.move_job(REPO, job, "in_progress")
            self.imm(run_id, "integrate", "reconcile", "bench", "--report", "--verdicts",
                     str(verdicts), *asked, *on)  # fmt: skip
            self.github.move_job(REPO, job, "completed", "success")
        self.end(run_id)

    def lane(self, run_id: int, task: str) -> None:
        """The lane job: the agent's time, then its commit on its base, published."""
        job = self.github.add_job(REPO, run_id, f"imm lane {task}")
        self.github.move_job(REPO, job, "in_progress")
        begun = time.perf_counter()
        time.sleep(self.lane_s)
        checkout = self.clone(f"{run_id}-lane-{task}")
        from imm_action.batches.repo import open_batch_repo
        from imm_action.carriers.source import Initiatives, NoIssueSource
        from imm_action.integrate.store import StateStore

        refs = open_batch_repo(checkout, "origin", Initiatives(checkout, NoIssueSource())).refs
        refs.refresh()
        (stored,) = StateStore(refs).batches_of("bench")[-1:]
        child = next(c for c in stored.state.children if c.task_id == task)
        assert child.lane is not None
        base = child.lane.base_head
        subprocess.run(["git", "-C", str(checkout), "fetch", "-q", "origin", base], check=True)
        commit = make_lane_commit(checkout, base, task, {f"{task}.txt": f"{task}\n"},
                                  batch_id=stored.state.batch_id)  # fmt: skip
        publish(checkout, task, commit, slug="bench", remote="origin")
        self.github.move_job(REPO, job, "completed", "success")
        self.spans.append((begun, time.perf_counter(), f"run {run_id} lane {task}"))

    def verify_jobs(self, run_id: int, batch: str, job: dict[str, str], into: Path) -> None:
        if job.get("has-verify") != "true":
            return
        shards = [entry["shard"] for entry in json.loads(job["verify-matrix"])["include"]]

        def verify(shard: str) -> None:
            name = f"imm-verdict-{batch}-{run_id}-{shard}"
            self.imm(run_id, f"verify-{shard}", "verify", "--batch-id", batch, "--shard", shard,
                     "--verdicts", str(into / name))  # fmt: skip

        workers = [threading.Thread(target=verify, args=(shard,)) for shard in shards]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    def end(self, run_id: int) -> None:
        self.github.repo(REPO).runs[run_id]["status"] = "completed"

    def start_dispatched(self) -> None:
        """A run for each new dispatch: the run the fake made for it, in order."""
        repo = self.github.repo(REPO)
        dispatches = list(repo.dispatches)
        runs = sorted(i for i, run in repo.runs.items() if run["event"] == "workflow_dispatch")
        for index in range(self.started, len(dispatches)):
            inputs = dict(dispatches[index]["inputs"])
            thread = threading.Thread(target=self.workflow_run, args=(runs[index], inputs))
            thread.start()
            self.runs.append(thread)
        self.started = len(dispatches)


def read_outputs(text: str) -> dict[str, str]:
    """`name<<DELIMITER` blocks, as the runner reads $GITHUB_OUTPUT."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", text, re.MULTILINE | re.DOTALL):
        found[match.group(1)] = match.group(3)
    return found


def batch_state(world: World) -> str:
    from imm_action.batches.repo import open_batch_repo
    from imm_action.carriers.source import Initiatives, NoIssueSource
    from imm_action.integrate.store import StateStore

    checkout = world.clone(f"state-{time.monotonic_ns()}")
    refs = open_batch_repo(checkout, "origin", Initiatives(checkout, NoIssueSource())).refs
    refs.refresh()
    batches = StateStore(refs).batches_of("bench")
    return str(batches[-1].state.batch_state) if batches else "none"


def measure(
    src: Path, tasks: int, lane_s: float, verify_s: float, trace: bool = False
) -> tuple[float, int]:
    """Wall seconds from the first dispatch to the batch completed, and the runs it took."""
    scratch = Path(tempfile.mkdtemp(prefix="imm-pipelined-"))
    try:
        project = scratch / "project"
        project.mkdir()
        names = [f"t{index}" for index in range(tasks)]
        graph = {name: names[index - 1 : index] for index, name in enumerate(names)}
        checks = {name: own_check(name, verify_s) for name in names}
        write_project(project, "bench", graph, checks, config="verify_fan_out_seconds: 0\n")
        subprocess.run(["git", "clone", "-q", "--bare", str(project), str(scratch / "remote.git")],
                       check=True)  # fmt: skip
        with FakeGitHub(tokens={TOKEN: "github-actions[bot]"}) as github:
            github.add_repo(REPO)
            github.add_workflow(REPO, "imm-batch.yml")
            world = World(scratch, src, github, lane_s)
            started = time.perf_counter()
            client = GitHubClient(build_github(TOKEN, github.url), REPO)
            client.dispatch("imm-batch.yml", "main", {"initiative": "bench"})
            while True:
                world.start_dispatched()
                if all(not run.is_alive() for run in world.runs):
                    world.start_dispatched()
                    if all(not run.is_alive() for run in world.runs):
                        break
                time.sleep(0.05)
            wall = time.perf_counter() - started
            for begun, ended, job in sorted(world.spans) if trace else []:
                print(f"    {begun - started:6.1f} {ended - started:6.1f}  {job}")
            if world.failures:
                raise SystemExit("\n".join(world.failures))
            state = batch_state(world)
            if state != "completed":
                raise SystemExit(f"the batch ended {state}, not completed")
            return wall, world.started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def baseline_tree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(where), rev],
                   check=True)  # fmt: skip
    return where / "src"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="the chain's length")
    parser.add_argument("--lane", type=float, default=6.0, help="each lane's seconds")
    parser.add_argument("--verify", type=float, default=6.0, help="each check's seconds")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default="67939f9", help="one round at a time: this REV")
    parser.add_argument("--trace", action="store_true", help="print every job's span")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"a chain of {args.tasks} tasks, lanes {args.lane} s, every check {args.verify} s; "
          f"ideal (the lanes end to end): {args.tasks * args.lane:.1f} s")  # fmt: skip
    old = Path(tempfile.mkdtemp(prefix="imm-pipelined-rev-")) / "tree"
    trees = {"this tree": ROOT / "src", args.against: baseline_tree(args.against, old)}
    found: dict[str, list[tuple[float, int]]] = {name: [] for name in trees}
    try:
        for repeat in range(args.repeat):  # alternated: the load falls on both alike
            for name, src in trees.items():
                wall, runs = measure(src, args.tasks, args.lane, args.verify, args.trace)
                found[name].append((wall, runs))
                print(f"  {name:>10}: {wall:6.1f} s, {runs} runs   (run {repeat + 1})", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       check=False)  # fmt: skip
    medians = {name: statistics.median(w for w, _ in walls) for name, walls in found.items()}
    for name, walls in found.items():
        runs = statistics.median(r for _, r in walls)
        print(f"{name:>10}: median {medians[name]:6.1f} s, {medians[name] / args.tasks:5.1f} s per "
              f"hop, {runs:.0f} runs")  # fmt: skip
    print(f"this tree / {args.against}: {medians['this tree'] / medians[args.against]:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
