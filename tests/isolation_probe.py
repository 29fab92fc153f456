"""A lane-written check that attacks imm from where integration checks run (issue 20, ADR 0031).

`python3 <probe> EVIDENCE TARGETS [REMOTE]`, run by a lane's own check:
- reads every `/proc/*/environ` and `/proc/*/cmdline` it can, and counts the processes it sees;
- appends a git `insteadOf` rule to every file TARGETS (a JSON list) names;
- leaves a `setsid` sleeper behind (`sleep 299.25`: found by its command line with
  `running_with`, since a pid inside a PID namespace means nothing outside it);
- pushes to REMOTE, when given, with whatever credential git finds;
- writes what it found to `EVIDENCE/found-<uid>.json`, a folder any user may write.
Run as root it does nothing: that is a lane job's run of the check (it holds no write token,
ADR 0026); under act it shares the integrate job's host, which on GitHub it never does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROBE = """\
import glob, json, os, pathlib, subprocess, sys
evidence, targets, remote = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3:]
if os.getuid() == 0:
    sys.exit(0)
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
(evidence / f"found-{os.getuid()}.json").write_text(json.dumps(found))
"""
SLEEPER = b"sleep\0299.25"  # the command line the sleeper it leaves runs with


def findings(evidence: Path) -> dict[str, Any]:
    """What the probe's one run found (there is exactly one run that is not root's)."""
    [found] = [json.loads(path.read_text()) for path in evidence.glob("found-*.json")]
    result: dict[str, Any] = found
    return result


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
