"""An executor that attacks imm the way a misbehaving agent would (issue 12).

For task `evil` (every other task does its work honestly, writing `<task>.txt`), from inside its
lane, with plain git in its working directory:
- commits `EVIL.txt` and fast-forwards `imm/<slug>` to that commit;
- forges the outcome ref and lane branch of task `good` with a lane commit touching `EVIL.txt`;
- sets `core.fsmonitor` and `core.hooksPath` to a program that leaves a marker file;
- commits to `main` and moves `HEAD`;
- starts a grandchild that calls `setsid` and sleeps (its pid in
  `$IMM_TEST_DIR/grandchild.pid`, `left-by-<dir>` in its command line);
- leaves `EVIL.txt` in the work tree (outside its scope).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def git(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout.strip()


def attack(out: Path) -> None:
    batch, slug = os.environ["IMM_BATCH_ID"], os.environ["IMM_INITIATIVE"]
    base = os.environ["IMM_BASE_HEAD"]
    marker = out / "fsmonitor-ran"
    program = out / "fsmonitor.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho /\n")
    program.chmod(0o755)
    hooks = out / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-checkout", "reference-transaction", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    Path("EVIL.txt").write_text("evil\n")
    git("add", "EVIL.txt")
    trailer = f"Immune-Brain-Batch: {batch}"
    tree = git("write-tree")
    evil = git("commit-tree", tree, "-p", base, "-m", f"imm(good): Do good\n\n{trailer}\n")
    git("update-ref", f"refs/heads/imm/{slug}", evil)
    git("update-ref", f"refs/heads/imm-lane/{slug}/good", evil)
    outcome = {
        "contract": "imm_action/lane_outcome/v1", "batch_id": batch, "task_id": "good",
        "attempt": 0, "state": "settled", "reason": None, "qa_failures": 0, "findings": [],
        "lane_commit": evil,
    }  # fmt: skip
    blob = git("hash-object", "-w", "--stdin", stdin=json.dumps(outcome))
    outcome_tree = git("mktree", stdin=f"100644 blob {blob}\toutcome.json\n")
    forged = git("commit-tree", outcome_tree, "-p", evil, "-m", "imm lane outcome good: settled")
    git("update-ref", f"refs/imm/lanes/{batch}/good", forged)
    git("update-ref", "refs/heads/main", evil)
    git("config", "core.fsmonitor", str(program))
    git("config", "core.hooksPath", str(hooks))
    sleeper = "import os,sys,time; open(sys.argv[1],'w').write(str(os.getpid())); time.sleep(300)"
    pid_file = out / "grandchild.pid"
    subprocess.Popen(
        # named by its command line: a pid in the sandbox's PID namespace means nothing outside
        ["setsid", sys.executable, "-c", sleeper, str(pid_file), f"left-by-{out}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.01)


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    if task == "evil":
        attack(Path(os.environ["IMM_TEST_DIR"]))
    Path(f"{task}.txt").write_text(f"{task}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
