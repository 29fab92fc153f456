"""A smart-HTTP git host on 127.0.0.1 that requires a token: the stand-in for github.com's git.

`git http-backend` (git's own CGI server side of the smart HTTP protocol) runs behind a small
threaded `http.server`. Every request must carry the token, as GitHub accepts it:

- `Authorization: Basic base64(<any user>:<token>)` — what `actions/checkout` configures
  (`http.<url>.extraheader`, user `x-access-token`) and what a credential helper sends; or
- `Authorization: Bearer <token>`.

Anything else gets `401` with a `WWW-Authenticate: Basic` challenge, like GitHub; git then asks
for credentials, and with `GIT_TERMINAL_PROMPT=0` fails with "could not read Username".

Usage (see also the `git_http_remote` fixture in tests/conftest.py):

    with GitHttpRemote(tmp_path / "host", token="s3cret") as host:
        bare = host.create_repository("project")          # an empty bare repository
        url = host.url("project")                         # http://127.0.0.1:PORT/project.git
        git("config", f"http.{url}.extraheader", host.auth_header("s3cret"))
        host.fail_next(2, status=503)                     # the next 2 requests get a 503

Faults: `fail_next(count, status)` answers the next `count` requests with `status` (e.g. 502/503
for a passing outage). `requests` records (method, path, status) of every request, for asserts.
Pushes are enabled (`http.receivepack`), so fetch, ls-remote and push all work.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import BinaryIO
from urllib.parse import urlsplit

TOKEN_USER = "x-access-token"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int


def auth_header(token: str, user: str = TOKEN_USER) -> str:
    """The `http.extraheader` value `actions/checkout` writes: Basic auth carrying the token."""
    encoded = base64.b64encode(f"{user}:{token}".encode()).decode("ascii")
    return f"Authorization: Basic {encoded}"


class GitHttpRemote:
    """Bare repositories under `root`, served over smart HTTP to holders of `token`."""

    def __init__(self, root: Path, token: str) -> None:
        self.root = root
        self.token = token
        self.requests: list[Request] = []
        self._faults: list[int] = []
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> GitHttpRemote:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> GitHttpRemote:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # -- repositories -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}.git"

    def create_repository(self, name: str, *, default_branch: str = "main") -> Path:
        """An empty bare repository `<root>/<name>.git` that accepts pushes."""
        bare = self.root / f"{name}.git"
        _git(self.root, "init", "-q", "--bare", "-b", default_branch, str(bare))
        _git(bare, "config", "http.receivepack", "true")
        return bare

    def auth_header(self, token: str | None = None) -> str:
        return auth_header(self.token if token is None else token)

    # -- faults -------------------------------------------------------------------------------
    def fail_next(self, count: int, *, status: int = 503) -> None:
        """Answer the next `count` requests with `status` (after the token check passes)."""
        with self._lock:
            self._faults.extend([status] * count)

    def _take_fault(self) -> int | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append(Request(method, path, status))

    def authorized(self, header: str | None) -> bool:
        if not header:
            return False
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer":
            return credentials.strip() == self.token
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        return decoded.partition(":")[2] == self.token


def _handler_for(remote: GitHttpRemote) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: object) -> None:
            return None  # keep test output clean; `remote.requests` is the log

        def _serve(self) -> None:
            body = self._body()
            path = urlsplit(self.path).path
            if not remote.authorized(self.headers.get("Authorization")):
                remote._record(self.command, path, 401)  # before answering: git may exit at once
                self._answer(401, {"WWW-Authenticate": 'Basic realm="imm test git host"'}, b"")
                return
            fault = remote._take_fault()
            if fault is not None:
                remote._record(self.command, path, fault)
                self._answer(fault, {"Content-Type": "text/plain"}, b"injected fault\n")
                return
            status, headers, payload = self._backend(body)
            remote._record(self.command, path, status)
            self._answer(status, headers, payload)

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                return b"".join(_chunks(self.rfile))
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _backend(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
            split = urlsplit(self.path)
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(remote.root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": "/dev/null",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": split.path,
                "QUERY_STRING": split.query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": TOKEN_USER,
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_HTTP_MAX_REQUEST_BUFFER": "100M",
            }
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            done = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            return _cgi_response(done.stdout)

        def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    """The chunks of a `Transfer-Encoding: chunked` body (git uses it for large pushes)."""
    while True:
        size = int(stream.readline().split(b";")[0].strip(), 16)
        if size == 0:
            while stream.readline().strip():  # trailers, then the blank line
                pass
            return
        yield stream.read(size)
        stream.readline()  # the CRLF after each chunk


def _cgi_response(output: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a CGI program's output (headers, blank line, body)."""
    head, blank, body = output.partition(b"\r\n\r\n")
    if not blank:
        head, blank, body = output.partition(b"\n\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    return status, headers, body


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)
