"""An executor going for the steps of its lane job that run after it (ADR 0026), end to end with
act: it points the checkout's git at another host and writes its step's GITHUB_ENV and
GITHUB_PATH (a fake git). No step after it holds a token, so nothing it does can push with one:
the other host never sees the token, and the batch lands only the lanes' own changes."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.e2e.act_world import TOKEN, ActWorld


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def _record(self) -> None:
        self.seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._record()

    def do_POST(self) -> None:
        self._record()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def evil_host() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another host on 127.0.0.1 that records every request it gets, headers and all."""
    seen: list[dict[str, str]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_an_executor_rewriting_its_jobs_git_config_and_step_files_cannot_push_with_a_token(
    world: ActWorld, evil_host: tuple[str, list[dict[str, str]]]
) -> None:
    world.evil_url, seen = evil_host
    world.behaviour["a"] = "hostile"
    world.create({"a": [], "b": []}, "shop")
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()

    # The executor's writes took effect: a later step of its job ran its fake git ...
    calls = [json.loads(p.read_text()) for p in sorted(world.spy.glob("fake-git.*.json"))]
    assert calls, "no step after the executor ran the fake git"
    # ... which never held the token, and never pushed; nothing reached the other host with it.
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    held = [c["argv"] for c in calls if TOKEN in json.dumps(c) or basic in json.dumps(c)]
    assert held == []
    assert [c["argv"] for c in calls if "push" in c["argv"]] == []
    assert [r for r in seen if TOKEN in json.dumps(r) or basic in json.dumps(r)] == []

    # The batch lands the lanes' own changes, nothing else.
    assert [run.exit_code for run in runs] == [0], runs[-1].log[-3000:]
    assert world.state()["batch_state"] == "completed"
    changed = world.remote("diff", "--name-only", "refs/heads/main", "refs/heads/imm/shop")
    assert sorted(changed.split()) == ["a.txt", "b.txt"]
    pushed = world.remote("for-each-ref", "--format=%(refname)", "refs/heads")
    assert sorted(pushed.split()) == ["refs/heads/imm/shop", "refs/heads/main"]
