"""A Rust crate's batch against its plain `cargo test` (issue 59 #6), cargo through rustup.

A crate with `--tasks` tasks, each adding an integration test (`tests/<task>.rs`) judged by its
own `cargo test --test <task>`, the crate's suite (`cargo test`) as the branch check, `--lanes`
lanes, executors that write their file and stop. Measured in the same run: the batch's wall
(`imm run`), and the user's own `cargo test` of the batch's result in a fresh clone, cold (as
every check compiles: `target/` lies in each check's throwaway tree) and then warm. Printed:
the ratios, and the check runs the batch made. Needs cargo through rustup.

    python benchmarks/rust_crate.py [--tasks 6] [--lanes 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
EXECUTOR = shlex.join([sys.executable, "-c", (
    "import os, pathlib; t = os.environ['IMM_TASK_ID']; "
    "pathlib.Path('tests').mkdir(exist_ok=True); "
    "pathlib.Path('tests', t + '.rs').write_text("
    "'#[test]\\nfn ' + t + '_adds() { assert_eq!(calc::add(2, 2), 4); }\\n')"
)])  # fmt: skip
_GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True,
                          env={**os.environ, **_GIT_ENV})  # fmt: skip
    return done.stdout


def make_crate(root: Path, tasks: int, lanes: int) -> None:
    """The crate, its lockfile (cargo's own), the initiative and one intent per task."""
    sys.path.insert(0, str(ROOT))
    from tests.batch_helpers import initiative_files, intent
    from tests.conftest import descriptor

    root.mkdir(parents=True)
    (root / "src").mkdir()
    (root / "Cargo.toml").write_text(MANIFEST)
    (root / "src" / "lib.rs").write_text("pub fn add(a: i32, b: i32) -> i32 { a + b }\n")
    subprocess.run(["cargo", "generate-lockfile", "--offline"], cwd=root, check=True,
                   capture_output=True)  # fmt: skip
    names = [f"t{index}" for index in range(tasks)]
    intents = {}
    for name in names:
        check = descriptor(["test", "-q", "--test", name], executable="cargo", timeout_ms=300_000)
        acceptance = [{"id": "ok", "assertion": f"{name} adds", "verification": check}]
        intents[name] = intent(name, scope_hint=[f"tests/{name}.rs"], acceptance=acceptance)
    files = initiative_files("init", {name: [] for name in names}, intents)
    files[".gitignore"] = "target/\n"
    files[".github/imm.yml"] = (
        f"max_parallel: {lanes}\nbranch_checks:\n  - name: suite\n    command: cargo test -q\n"
    )
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "crate")


def one_run(scratch: Path, tasks: int, lanes: int) -> tuple[float, float, float, int]:
    """The batch's wall, the plain suite cold and warm on its result, its check runs."""
    repo = scratch / "crate"
    make_crate(repo, tasks, lanes)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
         "--executor", EXECUTOR], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    batch = time.perf_counter() - started
    said = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"the batch did not complete:\n{said}")
    runs = sum(int(found) for found in re.findall(r"(\d+) check runs?", said))
    clone = scratch / "clone"
    _git(scratch, "clone", "-q", "--branch", "imm/init", str(repo), str(clone))
    timed = []
    for _ in range(2):  # cold (a fresh target/), then warm
        started = time.perf_counter()
        subprocess.run(["cargo", "test", "-q"], cwd=clone, check=True, capture_output=True)
        timed.append(time.perf_counter() - started)
    return batch, timed[0], timed[1], runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--lanes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"rust crate: {args.tasks} tasks, {args.lanes} lanes, branch check `cargo test -q`")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    results = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="imm-rust-") as scratch:
            results.append(one_run(Path(scratch), args.tasks, args.lanes))
    batch, cold, warm, runs = (statistics.median(column) for column in zip(*results, strict=True))
    for index, (b, c, w, r) in enumerate(results, 1):
        print(f"run {index}: batch {b:.2f} s, cargo test cold {c:.2f} s, warm {w:.2f} s, "
              f"{r} check runs")  # fmt: skip
    print(f"median: batch {batch:.2f} s; the user's cargo test {cold:.2f} s cold, {warm:.2f} s "
          f"warm; batch / cold suite = {batch / cold:.1f}; {runs:.0f} check runs, "
          f"{batch / max(runs, 1):.2f} s of batch a run")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
