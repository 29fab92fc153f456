"""What a lane network list costs (issue 60, decision 0070).

1. One request through imm's proxy against one straight to the host, on localhost: a sandboxed
   command makes `--requests` plain-HTTP requests, each on a new connection, to a web server
   on 127.0.0.1 — once with `check_network: [allowed.test]` (sandbox loopback → bridge →
   unix socket → proxy → host), once with `open` (straight), in the same run, interleaved,
   `--runs` times. Printed: the added milliseconds a request (median). Goal: <= 5 ms.
2. A batch of 12 lanes (`imm run`, each executor makes a request, works `--agent-seconds` — an
   agent works minutes; the list's cost is per command, about 20 ms for the bridge's start, not
   per second: `--agent-seconds 2` shows it on lanes far shorter than an agent's — and writes
   its file; each task with a check of its own), `lane_network` and
   `check_network` a list against `open`, interleaved, `--runs` times. Printed: median walls
   and the ratio. Goal: <= 3 % slower.

    python benchmarks/lane_network.py [--requests 200] [--runs 3] [--lanes 12] [--agent-seconds 30]

Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the stand-in hosts are test code under tests/

from imm_action.model.network import NetworkMode  # noqa: E402
from imm_action.sandbox.choice import choose_confinement  # noqa: E402
from imm_action.sandbox.proxy import HOSTS_VARIABLE, NetworkReach  # noqa: E402
from tests.network_world import hosts_file, web_host  # noqa: E402

REQUEST_GOAL_MS = 5.0
BATCH_GOAL = 1.03
# n requests, each on a new connection, through the environment's proxy where one is set
REQUESTS = """
import http.client, os, sys, time, urllib.parse
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", ""))
started = time.perf_counter()
for _ in range(n):
    if proxy.hostname:
        c = http.client.HTTPConnection(proxy.hostname, proxy.port)
        c.request("GET", f"http://{host}:{port}/")
    else:
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("GET", "/")
    assert c.getresponse().read()
    c.close()
print(time.perf_counter() - started)
"""


def requests_wall(policy: NetworkMode | list[str], port: int, count: int) -> float:
    """Seconds for `count` requests from one sandboxed command under `policy`."""
    confinement = choose_confinement("auto", holds_credential=False)
    assert confinement.active, confinement.why
    reach = NetworkReach(policy, "check_network", confined=True)
    try:
        with reach.command() as command:
            argv = confinement.command(
                [sys.executable, "-c", REQUESTS, "allowed.test", str(port), str(count)],
                {}, binds=[], cwd="/", network=command.network,
            )  # fmt: skip
            done = subprocess.run(argv, env={"PATH": os.environ["PATH"]}, capture_output=True,
                                  text=True, check=True)  # fmt: skip
    finally:
        reach.close()
    return float(done.stdout.strip().splitlines()[-1])


def batch_wall(config: str, lanes: int, port: int, work: Path, agent_s: float) -> float:
    """Seconds for `imm run` of `lanes` independent tasks under `config`."""
    from tests.batch_helpers import make_project
    from tests.conftest import descriptor

    root = Path(tempfile.mkdtemp(prefix="imm-net-", dir=work))
    tasks: dict[str, list[str]] = {f"t{n:02d}": [] for n in range(lanes)}
    exists = "import pathlib, sys; sys.exit(not pathlib.Path(sys.argv[1]).exists())"
    checks = {task: descriptor(["-c", exists, f"{task}.txt"]) for task in tasks}
    config += f"max_parallel: {lanes}\n"
    repo = make_project(root / "r", tasks, checks=checks,
                        extra_files={".github/imm.yml": config})  # fmt: skip
    body = (
        "import os, pathlib, subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {REQUESTS!r}, 'allowed.test', '{port}', '1'], "
        "check=True, capture_output=True)\n"
        f"import time; time.sleep({agent_s})\n"
        "t = os.environ['IMM_TASK_ID']; pathlib.Path(t + '.txt').write_text(t)\n"
    )
    executor = shlex.join([sys.executable, "-c", body])
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
         "--executor", executor],
        env={**os.environ, "HOME": str(root)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lanes", type=int, default=12)
    parser.add_argument("--agent-seconds", type=float, default=30.0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    work = Path(tempfile.mkdtemp(prefix="imm-lane-network-"))
    os.environ[HOSTS_VARIABLE] = str(hosts_file(work))
    with web_host() as port:
        listed, straight = [], []
        for _ in range(args.runs):
            listed.append(requests_wall(["allowed.test"], port, args.requests))
            straight.append(requests_wall("open", port, args.requests))
        added_ms = (statistics.median(listed) - statistics.median(straight)) / args.requests * 1e3
        print(
            f"{args.requests} requests, new connection each (median of {args.runs}): "
            f"through the proxy {statistics.median(listed):.3f} s, straight "
            f"{statistics.median(straight):.3f} s; added {added_ms:.2f} ms a request"
        )
        listed_config = "lane_network: [allowed.test]\ncheck_network: [allowed.test]\n"
        with_list, with_open = [], []
        for _ in range(args.runs):
            with_list.append(batch_wall(listed_config, args.lanes, port, work, args.agent_seconds))
            with_open.append(batch_wall("lane_network: open\ncheck_network: open\n", args.lanes,
                                        port, work, args.agent_seconds))  # fmt: skip
        ratio = statistics.median(with_list) / statistics.median(with_open)
        print(f"imm run, {args.lanes} lanes (median of {args.runs}): with a list "
              f"{statistics.median(with_list):.2f} s, open {statistics.median(with_open):.2f} s: "
              f"{ratio:.3f}x  runs list {[round(t, 2) for t in with_list]} "
              f"open {[round(t, 2) for t in with_open]}")  # fmt: skip
    ok = added_ms <= REQUEST_GOAL_MS and ratio <= BATCH_GOAL
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("goals met" if ok else "GOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
