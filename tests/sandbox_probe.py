"""Lane code that attacks everything around it, as an executor and as the check it writes
(issue 29). `python sandbox_probe.py` is the executor: for every task it writes `<task>.txt`;
for task `spy` it also writes `probe.py` (the same attacks), which `spy`'s check runs in the
lane and again at integration. Every run, executor or check:

- reads `/proc/*/environ`, `/proc/*/cmdline` and the writable memory of every process it sees,
  looking for the token of `<out>/attack.json`;
- tries to read the planted SSH key that file names;
- plants a file in `/tmp`, `/var/tmp` and `/dev/shm` (`imm-plant-<tag of attack.json>`);
- tries to write `planted-by-probe` into every tree of the pool but its own;
- leaves a `setsid` sleeper, `left-by-<out>` in its command line;
- writes what it found to `<out>/found-<role>-<random>.json` and exits 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ATTACK = r"""
import glob, json, os, re, subprocess, sys
OUT = {out!r}
ROLE = sys.argv[1] if len(sys.argv) > 1 else "check"
config = json.load(open(os.path.join(OUT, "attack.json")))
token = config["token"].encode()
found = {{"role": ROLE, "processes": 0, "token_in": [], "ssh_key": None, "trees_written": [],
          "planted": []}}
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    found["processes"] += 1
    if int(name) == os.getpid():
        continue  # it holds the token itself, read from attack.json
    for part in ("environ", "cmdline"):
        try:
            if token in open(f"/proc/{{name}}/{{part}}", "rb").read():
                found["token_in"].append(f"{{name}}/{{part}}")
        except OSError:
            pass
    try:
        with open(f"/proc/{{name}}/maps") as maps, open(f"/proc/{{name}}/mem", "rb") as mem:
            for line in maps:
                start, end = (int(x, 16) for x in line.split()[0].split("-"))
                if "rw" not in line.split()[1] or end - start > 1 << 26:
                    continue
                try:
                    mem.seek(start)
                    if token in mem.read(end - start):
                        found["token_in"].append(f"{{name}}/mem")
                        break
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError:
        pass
try:
    found["ssh_key"] = open(config["ssh_key"]).read()
except OSError:
    pass
tag = config["tag"]
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(os.path.join(folder, f"imm-plant-{{tag}}"), "w") as handle:
            handle.write(ROLE)
        found["planted"].append(folder)
    except OSError:
        pass
here = os.path.realpath(os.getcwd())
for tree in glob.glob(os.path.join(config["repo"], ".git/imm/trees/*/tree")):
    if os.path.realpath(tree) == here:
        continue
    try:
        with open(os.path.join(tree, "planted-by-probe"), "w") as handle:
            handle.write(ROLE)
        found["trees_written"].append(tree)
    except OSError:
        pass
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(600)",
                  "left-by-" + OUT], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
name = f"found-{{ROLE}}-{{os.urandom(4).hex()}}.json"
with open(os.path.join(OUT, name), "w") as handle:
    json.dump(found, handle)
"""


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    out = os.environ["IMM_TEST_DIR"]
    code = ATTACK.format(out=out)
    if task == "spy":
        Path("probe.py").write_text(code)
        exec(compile(code.replace('sys.argv[1] if len(sys.argv) > 1 else "check"',
                                  '"executor"'), "probe", "exec"))  # fmt: skip
    Path(f"{task}.txt").write_text(f"{task}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
