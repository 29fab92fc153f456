"""A test executor: does for each task what the behaviour file says.

Behaviours: ok, fail_once, always_wrong, outside, empty, crash, sleep:<seconds>, needs_fix
(crashes until the file named by IMM_TEST_FIX exists), leak (prints the value of MY_API_KEY and
exits 2), flood:<MB> (prints one line of MB megabytes with terminal escapes in it, exits 1;
flood-lines:<N> prints N short lines, flood-binary:<MB> random bytes),
author (does its work and commits it with a hostile author name), links:<chain> (adds the
links of a chain: `path=target` pairs separated by commas).
With IMM_TEST_TIMELINE set, it records when it ran, for proving which lanes
overlapped; with IMM_TEST_PROMPTS set, it keeps each prompt it was given there; with
IMM_TEST_PIDS set, its pid when it starts."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    attempt = int(os.environ["IMM_ATTEMPT"])
    behaviours = json.loads(Path(os.environ["IMM_TEST_BEHAVIOUR"]).read_text())
    behaviour = behaviours.get(task, "ok")
    timeline = os.environ.get("IMM_TEST_TIMELINE")
    started = time.time()
    prompts = os.environ.get("IMM_TEST_PROMPTS")
    if prompts:
        prompt = Path(os.environ["IMM_PROMPT_FILE"]).read_text()
        (Path(prompts) / f"{task}.{attempt}.md").write_text(prompt)
    pids = os.environ.get("IMM_TEST_PIDS")
    if pids:
        (Path(pids) / f"{task}.{attempt}.{os.getpid()}").write_text("")
    if behaviour == "leak":
        print(f"connecting with key {os.environ.get('MY_API_KEY')}")
        return 2
    if behaviour.startswith("flood"):
        return flood(behaviour)
    if behaviour.startswith("sleep:"):
        time.sleep(float(behaviour.split(":")[1]))
    if behaviour == "crash" or (
        behaviour == "needs_fix" and not Path(os.environ["IMM_TEST_FIX"]).exists()
    ):
        return 3
    if behaviour != "empty":
        right = behaviour not in ("always_wrong",) and not (
            behaviour == "fail_once" and attempt == 1
        )
        target = Path(behaviours.get(f"{task}.file", f"{task}.txt"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{task}\n" if right else "wrong\n")
    if behaviour == "outside":
        Path("other.txt").write_text("not mine\n")
    hostile_extras(behaviour)
    if timeline:
        with open(Path(timeline) / f"{task}.{attempt}", "w") as out:
            out.write(f"{started} {time.time()}\n")
    return 0


# terminal escapes, and "Trojan Source" bidirectional controls and a zero-width space
BIDI = "\u202e\u2066\u200b"
ESCAPES = "\x1b[2J\x1b]0;pwned\x07\x1b[31m" + BIDI


def flood(behaviour: str) -> int:
    shape, count = behaviour.split(":")
    out = sys.stdout.buffer
    if shape == "flood-lines":
        for index in range(int(count)):
            out.write(f"{ESCAPES}line {index}\n".encode())
    elif shape == "flood-binary":
        out.write(os.urandom(int(count) << 20))
    else:  # one line of `count` megabytes
        block = ("x" * 1023 + ESCAPES[:1]) * 1024
        out.write(ESCAPES.encode())
        for _ in range(int(count)):
            out.write(block.encode())
        out.write(b"\n")
    out.flush()
    return 1


def hostile_extras(behaviour: str) -> None:
    if behaviour.startswith("links:"):
        for pair in behaviour.removeprefix("links:").split(","):
            path, target = pair.split("=", 1)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)
    if behaviour == "author":
        commit_as_someone_else()


def commit_as_someone_else() -> None:
    import subprocess

    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": f"Alice{ESCAPES} Maintainer <alice@example.com> forged",
        "GIT_AUTHOR_EMAIL": f"alice{ESCAPES}@example.com",
        "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x",
    }  # fmt: skip
    subprocess.run(["git", "add", "-A"], check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "work"], check=True, env=env)


if __name__ == "__main__":
    sys.exit(main())
