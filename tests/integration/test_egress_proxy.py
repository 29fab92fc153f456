"""imm's lane network proxy holds nothing a lane can grow without bound, and answers what is no
request without keeping it (issue 60, ADR 0070): spoken to over its unix socket as the bridge
in a sandbox would."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.model.network import HostRules
from imm_action.sandbox.confine import Egress
from imm_action.sandbox.proxy import MAX_HEAD, MAX_REFUSALS, EgressProxy, NetworkReach


@pytest.fixture
def proxy() -> Iterator[EgressProxy]:
    running = EgressProxy(HostRules.of(["allowed.test"]), key="check_network")
    try:
        yield running
    finally:
        running.close()


def _ask(path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(path))
        # the proxy may close before all of a head past its bound is sent
        with contextlib.suppress(OSError):
            client.sendall(request)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                answer += chunk
        return answer


def test_a_head_past_its_bound_is_dropped_unanswered_and_nothing_is_kept(
    proxy: EgressProxy,
) -> None:
    path = proxy.listen()
    huge = b"CONNECT other.test:443 HTTP/1.1\r\nX: " + b"a" * MAX_HEAD + b"\r\n\r\n"
    assert _ask(path, huge) == b""
    assert proxy.stop(path) == []


@pytest.mark.parametrize(
    "request_line",
    [b"CONNECT @octocat fixes #1:443 HTTP/1.1", b"GET http://other.test:99999/ HTTP/1.1",
     b"CONNECT other.test HTTP/1.1", b"GET /relative HTTP/1.1"],
    ids=["not a host", "port past 65535", "no port", "not a proxy request"],
)  # fmt: skip
def test_what_is_no_proxy_request_is_answered_400_and_not_kept(
    proxy: EgressProxy, request_line: bytes
) -> None:
    path = proxy.listen()
    assert _ask(path, request_line + b"\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert proxy.stop(path) == []


def test_the_refusals_kept_for_a_command_stop_at_their_bound_each_host_once(
    proxy: EgressProxy,
) -> None:
    path = proxy.listen()
    for number in range(MAX_REFUSALS + 10):
        for _ in range(2):
            answer = _ask(path, f"CONNECT h{number}.test:443 HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403 ")
    kept = proxy.stop(path)
    assert len(kept) == MAX_REFUSALS
    assert [r.address for r in kept[:2]] == ["h0.test:443", "h1.test:443"]
    assert {r.count for r in kept} == {2}


def test_a_process_forked_from_a_run_starts_its_own_proxy_and_leaves_its_parents_alone() -> None:
    """`imm run` forks its lanes while its own proxy's thread runs: a lane that used (or
    closed) the parent's proxy waited forever on a loop with no thread in it."""
    reach = NetworkReach(["allowed.test"], "check_network", confined=True)
    try:
        with reach.command():
            pass
        child = os.fork()
        if child == 0:  # pragma: no cover (the child's exit status is the test's)
            try:
                with reach.command() as command:
                    seen = isinstance(command.network, Egress) and command.network.socket.exists()
                reach.close()
                os._exit(0 if seen else 1)
            except BaseException:
                os._exit(2)
        deadline = time.monotonic() + 20
        while (ended := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if ended[0] == 0:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        assert ended[0] == child, "the forked process hung on its parent's proxy"
        assert os.waitstatus_to_exitcode(ended[1]) == 0
        with reach.command() as command:  # the parent's still serves
            assert isinstance(command.network, Egress)
            assert command.network.socket.exists()
    finally:
        reach.close()
