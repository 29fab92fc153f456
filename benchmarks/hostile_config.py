"""Hostile `.github/imm.yml` files are refused fast and small (issue 12).

Runs `imm check` as a process on a repository whose config is (a) an ordinary file, (b) 5 MB,
(c) an alias bomb of a few hundred bytes (9**9 strings once expanded), and prints the wall time
(best of --repeat) and the peak memory of each, with the ratio to the ordinary file.

    python benchmarks/hostile_config.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

LEVELS = "abcdefghi"
BOMB = "\n".join(
    [
        "a: &a [" + ", ".join(['"lol"'] * 9) + "]",
        *(f"{n}: &{n} [{', '.join(['*' + b] * 9)}]" for b, n in itertools.pairwise(LEVELS)),
    ]
)
CONFIGS = {
    "ordinary": "max_parallel: 4\nexecutor: agent\n",
    "5 MB": "# " + "x" * (5 * 1024 * 1024) + "\n",
    "alias bomb": BOMB,
}
PROBE = (
    "import resource, subprocess, sys, time;"
    "t = time.perf_counter(); done = subprocess.run(sys.argv[1:], capture_output=True);"
    "t = time.perf_counter() - t;"
    "print(done.returncode, t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def make_repo(root: Path, config: str) -> Path:
    (root / ".github").mkdir(parents=True)
    (root / ".github/imm.yml").write_text(config)
    (root / "docs/initiatives").mkdir(parents=True)
    (root / "docs/initiatives/x.md").write_text("## s: S\nTasks:\n- a\n")
    (root / "docs/plans").mkdir(parents=True)
    (root / "docs/plans/a.intent.json").write_text(json.dumps({}))
    env = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", *env, "commit", "-qm", "x"], cwd=root, check=True)
    return root


def measure(repo: Path, repeat: int) -> tuple[int, float, int, float]:
    """(exit code, best wall time of `imm check`, its peak memory in KiB, best time of reading
    the config in this process)."""
    from imm_action.errors import InputError
    from imm_action.workspace import load_config

    best, peak, code, inner = math.inf, 0, 0, math.inf
    argv = [sys.executable, "-m", "imm_action", "check", "--repo", str(repo)]
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
        )
        code_text, seconds, kib = out.stdout.split()
        code, best, peak = int(code_text), min(best, float(seconds)), max(peak, int(kib))
        started = time.perf_counter()
        with contextlib.suppress(InputError):
            load_config(repo)
        inner = min(inner, time.perf_counter() - started)
    return code, best, peak, inner


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as scratch:
        results = {
            name: measure(make_repo(Path(scratch) / str(i), config), repeat)
            for i, (name, config) in enumerate(CONFIGS.items())
        }
    base = results["ordinary"][1]
    print(f"{'config':<12} {'exit':>4} {'imm check':>10} {'ratio':>6} {'peak MB':>8} {'read':>9}")
    for name, (code, seconds, kib, inner) in results.items():
        print(
            f"{name:<12} {code:>4} {seconds:>9.3f}s {seconds / base:>6.2f} {kib / 1024:>8.1f} "
            f"{inner * 1000:>7.1f}ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
