"""Lane code that reaches for what the sandbox's allowlist must keep from it (issue 43), as an
executor and as the check it writes. The test copies this file to `/tmp/<name>.py` and runs
`python3 /tmp/<name>.py` as the executor: a script named in `/tmp` itself. `<out>/allow.json`
(written by the test; `IMM_TEST_DIR` names `<out>`) lists:

- `credentials`: files in a home outside /tmp, each holding a secret;
- `sockets`: unix sockets the test listens on (under `/run` in a 0770 folder, under `/tmp`);
- `host_file`: a file in a host folder everyone may write, outside /tmp;
- `repo`: the repository, whose pool's other trees and overlay base must be out of reach;
- `toolchains`: commands lane code runs through PATH, each of which must still work.

For task `spy` the executor also writes `probe.py` (the same reaching) into its tree, which
`spy`'s check runs in the lane and again at integration. Task `slow` sleeps while `spy`
reaches, so another lane's tree exists. Each run writes `<out>/found-<role>-<random>.json`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def reach(out: str, role: str) -> None:
    config = json.loads(Path(out, "allow.json").read_text())
    found: dict[str, object] = {"role": role}
    read: dict[str, str] = {}
    for path in config["credentials"]:
        with contextlib.suppress(OSError):
            read[path] = Path(path).read_text()
    found["credentials_read"] = read
    ran = []
    for argv in config["toolchains"]:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            ran.append((done.returncode, (done.stdout + done.stderr).strip()[-300:]))
        except OSError as error:
            ran.append((-1, str(error)))
    found["toolchains"] = ran
    connected = []
    for path in config["sockets"]:
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(3)
        try:
            client.connect(path)
            connected.append(path)
        except OSError:
            pass
        finally:
            client.close()
    found["sockets_connected"] = connected
    try:
        Path(config["host_file"]).write_text(role)
        found["host_written"] = True
    except OSError:
        found["host_written"] = False
    found["tmp_listing"] = sorted(os.listdir("/tmp"))
    status = Path("/proc/self/status").read_text().splitlines()
    found["caps"] = {line.split(":")[0]: line.split()[1] for line in status
                     if line.startswith(("CapEff", "CapBnd", "CapPrm"))}  # fmt: skip
    trees = [
        *glob.glob(os.path.join(config["repo"], ".git/imm/trees/*/upper")),
        *glob.glob(os.path.join(config["repo"], ".git/imm/trees/*/layer")),
        *glob.glob("/dev/shm/imm-*/*/tree"),
    ]
    found["trees_reached"] = [tree for tree in trees if os.access(tree, os.R_OK)]
    name = f"found-{role}-{os.urandom(4).hex()}.json"
    Path(out, name).write_text(json.dumps(found))


def main() -> int:
    out = os.environ["IMM_TEST_DIR"]
    task = os.environ["IMM_TASK_ID"]
    if task == "slow":
        time.sleep(4)  # its tree stands while `spy` reaches
    if task == "spy":
        source = Path(__file__).read_text()
        Path("probe.py").write_text(source.replace("# CHECK-ENTRY ", ""))
        reach(out, "executor")
    Path(f"{task}.txt").write_text(f"{task}\n")
    return 0


if __name__ == "__main__" and os.environ.get("IMM_TASK_ID") is not None:
    sys.exit(main())
# CHECK-ENTRY if __name__ == "__main__": reach(sys.argv[1], "check")
