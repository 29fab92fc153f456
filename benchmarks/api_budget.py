"""GitHub requests per reconcile pass (the fake GitHub's request log is the judge).

For initiatives of 10, 100 and 500 tasks carried by a GitHub issue (tracker protocol), runs a
first pass (start the batch, admit, report) and a second, idle pass, and prints how many requests
each made: the initiative read (GraphQL, one query per 100 sub-issues) and the reporting
(status comment, check run, pull request).

    python benchmarks/api_budget.py [--tasks 10,100,500]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the fake GitHub is test code under tests/

from imm_action.carriers.github import GitHubSource  # noqa: E402
from imm_action.commands import reconcile  # noqa: E402
from imm_action.commands.io import CommandIO  # noqa: E402
from imm_action.github.client import GitHubClient, build_github  # noqa: E402
from tests.fake_github import FakeGitHub  # noqa: E402

REPO = "acme/widgets"
DESCRIPTOR = json.dumps({"contract": "assurance_kernel/verification_descriptor/v2",
                         "command": {"executable": "true"}})  # fmt: skip


def arrange(fake: FakeGitHub, root: Path, tasks: int) -> None:
    ids = [f"t{index:04d}" for index in range(tasks)]
    (root / "docs/plans").mkdir(parents=True)
    for task in ids:
        acceptance = [{"id": "ok", "assertion": "ok", "verification": DESCRIPTOR}]
        intent = {
            "contract": "assurance_kernel/task_intent/v1", "task_id": task, "goal": task,
            "acceptance": acceptance, "scope_hint": [f"{task}.txt"], "risk": "routine",
            "revision": 1, "owner": "user",
        }  # fmt: skip
        (root / f"docs/plans/{task}.intent.json").write_text(json.dumps(intent))
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": "/dev/null"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "intents"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    parent = fake.add_tracker_initiative(REPO, "big")
    for task in ids:
        fake.add_tracker_task(REPO, parent, "big", task)


def one_pass(fake: FakeGitHub, root: Path) -> tuple[int, int]:
    client = GitHubClient(build_github("test-token", fake.url), REPO)
    source = GitHubSource(client, REPO, str(fake.repo(REPO).id))
    reporting = reconcile.GitHubReporting(client, source, f"https://github.example/{REPO}")
    args = reconcile.ReconcileArgs(
        "big", root, None, True, None, "text", os.environ.get("PATH", "")
    )
    before = len(fake.requests)
    sink = io.StringIO()
    reconcile.run(args, CommandIO(sink, sink), reporting)
    made = fake.requests[before:]
    reads = sum(1 for request in made if request.path == "/graphql")
    return len(made), reads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="10,100,500")
    args = parser.parse_args()
    print(f"{'tasks':>6} {'first pass':>11} {'(reads)':>8} {'idle pass':>10} {'(reads)':>8}")
    for tasks in [int(n) for n in args.tasks.split(",")]:
        scratch = Path(tempfile.mkdtemp(prefix="imm-api-budget-"))
        try:
            with FakeGitHub() as fake:
                fake.add_repo(REPO)
                arrange(fake, scratch / "repo", tasks)
                first, first_reads = one_pass(fake, scratch / "repo")
                idle, idle_reads = one_pass(fake, scratch / "repo")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"{tasks:>6} {first:>11} {first_reads:>8} {idle:>10} {idle_reads:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
