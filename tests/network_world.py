"""Stand-in hosts for the lane network tests (issue 60): no internet here, so a web server on
127.0.0.1 answers for names a hosts file maps to it (`IMM_PROXY_HOSTS`, which imm's proxy
resolves by first), and a user's own proxy that asks for credentials."""

from __future__ import annotations

import base64
import http.server
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NAMES = ("allowed.test", "api.allowed.test", "other.test")


SEEN: list[str] = []  # every request the web hosts answered: `Host path`


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        SEEN.append(f"{self.headers.get('Host')} {self.path}")
        body = f"hello from {self.headers.get('Host')}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.do_GET()

    def log_message(self, *_: object) -> None:
        pass


@contextmanager
def web_host() -> Iterator[int]:
    """A web server on 127.0.0.1 saying which host it was asked for; its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def hosts_file(folder: Path) -> Path:
    path = folder / "hosts"
    path.write_text(f"127.0.0.1 {' '.join(NAMES)}\n", encoding="utf-8")
    return path


class UserProxy:
    """The user's own proxy: CONNECT only, with `user:password` asked for; what it was sent."""

    def __init__(self, user: str, password: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.authorized: list[str] = []  # the targets it tunnelled to
        self.refused = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        lines = head.decode("latin-1").split("\r\n")
        target = lines[0].split(" ")[1]
        headers = {line.partition(":")[0].lower(): line.partition(":")[2].strip()
                   for line in lines[1:] if line}  # fmt: skip
        if headers.get("proxy-authorization") != self.expected:
            self.refused += 1
            client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
            client.close()
            return
        self.authorized.append(target)
        port = target.rpartition(":")[2]
        upstream = socket.create_connection(("127.0.0.1", int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        _splice(client, upstream)


def _splice(left: socket.socket, right: socket.socket) -> None:
    sockets = [left, right]
    try:
        while True:
            ready, _, _ = select.select(sockets, [], [], 30)
            if not ready:
                return
            for source in ready:
                chunk = source.recv(65536)
                if not chunk:
                    return
                (right if source is left else left).sendall(chunk)
    finally:
        left.close()
        right.close()
