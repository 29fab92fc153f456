"""Integration overhead on a 50,000-file repository: candidates built with merge-tree and
commit-tree (no checkout) against a checkout-and-`git merge` baseline measured in the same run.

    python benchmarks/integration.py [--files 50000] [--lanes 20]

Per candidate, "ours" is everything the integrator does except running descriptors: lineage
guards, merge-base proof, merge-tree, commit-tree and the change-identity proof.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from imm_action.git.candidate import Candidate, build_candidate  # noqa: E402
from imm_action.git.repo import GitRepo  # noqa: E402

ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=ENV, input=stdin, capture_output=True, check=True
    )
    return done.stdout.decode().strip()


def generate(repo: Path, files: int) -> str:
    """A base commit of `files` small files in folders of 100, made with fast-import."""
    git(repo, "init", "-q", "-b", "main")
    stream = [
        b"commit refs/heads/main\n",
        b"committer bench <bench@example.com> 1700000000 +0000\n",
        b"data 4\nbase\n",
    ]
    for index in range(files):
        content = f"file {index}\n".encode() * 4
        stream.append(f"M 100644 inline d{index // 100:04d}/f{index:05d}.txt\n".encode())
        stream.append(b"data %d\n" % len(content) + content + b"\n")
    git(repo, "fast-import", "--quiet", stdin=b"".join(stream))
    return git(repo, "rev-parse", "main")


def lane_commits(repo: Path, base: str, lanes: int, files: int) -> list[str]:
    """Lanes from the same base, each changing files in its own folder."""
    commits = []
    folders = max(1, files // 100)
    for lane in range(lanes):
        folder = (lane * 7919) % folders
        message = f"imm(t{lane}): lane {lane}\n"
        stream = (
            f"commit refs/heads/lane{lane}\ncommitter bench <bench@example.com> 1700000001 +0000\n"
            f"data {len(message)}\n{message}from {base}\n"
            f"M 100644 inline d{folder:04d}/new{lane}.txt\ndata 4\nnew\n"
            f"M 100644 inline d{folder:04d}/f{folder * 100:05d}.txt\ndata 8\nchanged\n\n"
        ).encode()
        git(repo, "fast-import", "--quiet", stdin=stream)
        commits.append(git(repo, "rev-parse", f"lane{lane}"))
    return commits


def ours(repo: Path, base: str, lanes: list[str]) -> tuple[float, str]:
    git_repo = GitRepo(repo)
    head = base
    started = time.perf_counter()
    for lane in lanes:
        built = build_candidate(git_repo, head, base, lane)
        if not isinstance(built, Candidate):
            raise SystemExit(f"lane {lane} did not build: {built}")
        head = built.commit
    return (time.perf_counter() - started) / len(lanes), git(repo, "rev-parse", f"{head}^{{tree}}")


def baseline(repo: Path, base: str, lanes: list[str]) -> tuple[float, str]:
    """The usual way: a worktree, check out the head, `git merge` the lane commit."""
    work = repo.parent / "baseline-worktree"
    git(repo, "worktree", "add", "-q", "--detach", str(work), base)
    started = time.perf_counter()
    for lane in lanes:
        git(work, "checkout", "-q", "--detach")
        git(work, "merge", "-q", "--no-edit", "--no-ff", "-m", "merge", lane)
    per = (time.perf_counter() - started) / len(lanes)
    tree = git(work, "rev-parse", "HEAD^{tree}")
    git(repo, "worktree", "remove", "--force", str(work))
    return per, tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--lanes", type=int, default=20)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="imm-bench-integration-"))
    try:
        repo = scratch / "repo"
        repo.mkdir()
        base = generate(repo, args.files)
        lanes = lane_commits(repo, base, args.lanes, args.files)
        ours_per, ours_tree = ours(repo, base, lanes)
        base_per, base_tree = baseline(repo, base, lanes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"repository: {args.files} files, {args.lanes} lanes from one base")
    print(f"merge-tree candidates:      {ours_per * 1000:7.1f} ms per candidate")
    print(f"checkout + git merge:       {base_per * 1000:7.1f} ms per candidate")
    print(f"ratio: {base_per / ours_per:.1f}x faster; same final tree: {ours_tree == base_tree}")
    return 0 if ours_tree == base_tree else 1


if __name__ == "__main__":
    raise SystemExit(main())
