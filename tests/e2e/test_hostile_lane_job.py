"""An executor going for the steps of its lane job that run after it (ADRs 0026, 0048), end to
end with act: it tries to point the checkout's git at another host and to write its step's
GITHUB_ENV and GITHUB_PATH (a fake git). In the sandbox it finds neither (the checkout's `.git`
and the runner's folders are hidden, imm's processes invisible), and no step after it holds a
token anyway: the other host never sees the token, and the batch lands only the lanes' own
changes."""

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

    # The executor tried, from the sandbox (ADR 0048): it found neither the checkout's git
    # config nor its job's files, so no later step ran its fake git ...
    tried = json.loads((world.spy / "hostile.a.json").read_text())
    assert "wrote" not in {tried.get("GITHUB_PATH"), tried.get("GITHUB_ENV")}, tried
    assert list(world.spy.glob("fake-git.*.json")) == []
    # ... and nothing reached the other host with the token.
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert [r for r in seen if TOKEN in json.dumps(r) or basic in json.dumps(r)] == []

    # The batch lands the lanes' own changes, nothing else.
    assert [run.exit_code for run in runs] == [0], runs[-1].log[-3000:]
    assert world.state()["batch_state"] == "completed"
    changed = world.remote("diff", "--name-only", "refs/heads/main", "refs/heads/imm/shop")
    assert sorted(changed.split()) == ["a.txt", "b.txt"]
    pushed = world.remote("for-each-ref", "--format=%(refname)", "refs/heads")
    assert sorted(pushed.split()) == ["refs/heads/imm/shop", "refs/heads/main"]
