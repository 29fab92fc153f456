"""The fixed cost of a GitHub job of imm's, outside the executor: the install step on a cold
job (uv against pip, measured in the same run), `imm --version` in a fresh process, and — under
act, with the shipped workflows — each step of one lane job and of one integrate job.

1. Install, cold: `action/install.sh` into an empty tool cache with no pip cache, as a fresh
   runner has it; uv (the action's installer) and pip (IMM_INSTALLER=pip, the old installer)
   interleaved, `--runs` each, in a GitHub runner's environment (no PYTHONDONTWRITEBYTECODE).
   Goal: uv <= 5 s median. Also uv where PYTHONDONTWRITEBYTECODE is set: it compiles the
   bytecode at install, which a runner's first step would otherwise write.
2. `imm --version`, a fresh process from the installed environment, 10 runs. Goal: <= 0.15 s.
3. One batch of one task under act (host mode, local stand-ins for GitHub's actions, the fake
   GitHub): the steps of the lane job and of the integrate job, from act's log, with uv and
   with pip, each run in a fresh tool cache. The run's plan job installs; the lane and
   integrate jobs find that install, as `actions/cache` gives it to them on GitHub: these rows
   are a job's cost once installed, not a comparison of installers (part 1 is).

    python benchmarks/job_overhead.py [--runs 5] [--no-act]

Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the act world is test code under tests/

INSTALL_GOAL_S = 5.0
VERSION_GOAL_S = 0.15
STEP = re.compile(
    r"^\[imm-batch/(?P<job>[^\]]+)\]\s+\S+\s+(?:Success|Failure) - Main "
    r"(?P<step>.+?) \[(?P<took>[^\]]+)\]$"
)
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|µs|us|ns|m|s)")
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def cold_install(installer: str, *, no_bytecode: bool = False) -> tuple[float, Path]:
    """Seconds for install.sh into an empty tool cache, and the imm it installed."""
    work = Path(tempfile.mkdtemp(prefix="imm-install-"))
    output = work / "output"
    output.touch()
    env = {
        **os.environ, "GITHUB_ACTION_PATH": str(ROOT), "RUNNER_TOOL_CACHE": str(work / "tools"),
        "RUNNER_TEMP": str(work), "GITHUB_OUTPUT": str(output), "IMM_INSTALLER": installer,
        "PIP_NO_CACHE_DIR": "1", "IMM_PYTHON": sys.executable,
    }  # fmt: skip
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    started = time.perf_counter()
    subprocess.run(["bash", str(ROOT / "action/install.sh")], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    took = time.perf_counter() - started
    imm = next(line for line in output.read_text().splitlines() if line.startswith("imm="))
    return took, Path(imm.removeprefix("imm="))


def version_time(imm: Path, runs: int = 10) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(imm), "--version"], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def seconds(text: str) -> float:
    return sum(float(n) * UNITS[unit] for n, unit in GO_DURATION.findall(text))


def act_steps(installer: str) -> dict[str, dict[str, float]]:
    """Each job's steps (seconds) in one one-task batch run under act."""
    from tests.e2e.act_world import TOKEN as ACT_TOKEN
    from tests.e2e.act_world import ActWorld
    from tests.fake_github import FakeGitHub
    from tests.git_http_remote import GitHttpRemote

    root = Path(tempfile.mkdtemp(prefix="imm-act-"))
    with (
        GitHttpRemote(root / "git-host", token=ACT_TOKEN) as host,
        FakeGitHub(tokens={ACT_TOKEN: "github-actions[bot]"}) as github,
    ):
        world = ActWorld(root / "world", root / "home", host, github)
        # act's steps inherit its environment: the installer to measure reaches install.sh
        original = world._environment
        world._environment = lambda: {**original(), "IMM_INSTALLER": installer}  # type: ignore[method-assign]
        world.create({"a": []}, "one")
        world.dispatch({"initiative": "one"})
        runs = world.run_dispatches()
    jobs: dict[str, dict[str, float]] = {}
    for line in "".join(run.log for run in runs[:1]).splitlines():
        found = STEP.match(line.strip())
        # A composite action's own line (`./`, `owner/name@ref`) spans its inner steps, which
        # are listed too: counting both would count their time twice.
        if found and found["step"] != "./" and "@" not in found["step"]:
            jobs.setdefault(found["job"].strip(), {})[found["step"]] = seconds(found["took"])
    return jobs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-act", action="store_true", help="skip part 3")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    uv_times, compiled_times, pip_times, imm = [], [], [], None
    for _ in range(args.runs):
        took, imm = cold_install("uv")
        uv_times.append(took)
        compiled_times.append(cold_install("uv", no_bytecode=True)[0])
        pip_times.append(cold_install("pip")[0])
    uv_s, pip_s = statistics.median(uv_times), statistics.median(pip_times)
    print(f"install, cold (median of {args.runs}): uv {uv_s:.2f} s, pip {pip_s:.2f} s "
          f"(pip / uv = {pip_s / uv_s:.1f}x)  runs uv {[round(t, 2) for t in uv_times]} "
          f"pip {[round(t, 2) for t in pip_times]}")  # fmt: skip
    print(f"install, cold, PYTHONDONTWRITEBYTECODE set (uv compiles): "
          f"{statistics.median(compiled_times):.2f} s  runs "
          f"{[round(t, 2) for t in compiled_times]}")  # fmt: skip
    assert imm is not None
    version_s = version_time(imm)
    print(f"imm --version, fresh process (median of 10): {version_s:.3f} s")
    ok = uv_s <= INSTALL_GOAL_S and version_s <= VERSION_GOAL_S
    if not args.no_act:
        for installer in ("uv", "pip"):
            for job, steps in act_steps(installer).items():
                if not (job.startswith("imm lane") or job == "integrate"):
                    continue
                total = sum(steps.values())
                shown = ", ".join(f"{step} {took:.2f}" for step, took in steps.items())
                print(f"act, {installer}: {job}: {total:.2f} s in steps: {shown}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("goals met" if ok else "GOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
