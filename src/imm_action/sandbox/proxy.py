"""The proxy lane code reaches the network through where a list of hosts is set (issue 60,
decision 0070). It runs in imm's process, outside the sandbox, for as long as the run (or the
lane, or the job) that made it; lane code runs without the host's network and reaches it only
through a unix socket bound into its sandbox (bridge.py forwards a port of the sandbox's own
loopback to it).

It speaks HTTP proxy: CONNECT for TLS (and anything else over a tunnel), absolute-form requests
for plain HTTP (sent on with `Connection: close`, one request per connection). A host is judged
by the name asked for (model/network.py), before anything is resolved, so no DNS answer can
widen the list; an address is admitted only where the list writes it. What it refuses is
answered `403` with the line that would allow it, and kept per listener (host, port, first
time, how often) up to `MAX_REFUSALS` distinct ones.

The user's own proxy (imm's `HTTPS_PROXY`, credentials and all) stays here: the proxy tunnels
through it with CONNECT, and lane code sees only the sandbox's `http://127.0.0.1:<port>`.
Nothing a lane sends grows without bound here: a request's head is at most `MAX_HEAD` bytes and
must arrive within `HEAD_TIMEOUT_S`; a listener serves `MAX_CONNECTIONS` at once."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from imm_action.model.network import (
    HostRules,
    NetworkMode,
    host_port,
    refused_line,
    rules_of,
    split_host_port,
    valid_host,
)
from imm_action.sandbox.confine import Egress, NetworkAccess

MAX_HEAD = 64 << 10
HEAD_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256
MAX_REFUSALS = 50
_CHUNK = 1 << 16
_DROPPED_HEADERS = frozenset(
    {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
)


@dataclass
class Refusal:
    """A host a listener's commands asked for and were refused."""

    host: str
    port: int
    first: float  # time.time() of the first ask
    count: int = 1

    @property
    def address(self) -> str:
        return host_port(self.host, self.port)


@dataclass(frozen=True)
class Upstream:
    """The user's own proxy, which imm's proxy tunnels through."""

    host: str
    port: int
    authorization: str | None = None  # a Proxy-Authorization value
    bypass: tuple[str, ...] = ()  # its NO_PROXY: hosts reached directly

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Upstream | None:
        url = next((environ[name] for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                                               "all_proxy", "HTTP_PROXY", "http_proxy")
                    if environ.get(name)), None)  # fmt: skip
        if url is None:
            return None
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname is None:
            return None
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode()
        bypass = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
        names = tuple(
            name.strip().lstrip(".").lower() for name in bypass.split(",") if name.strip()
        )
        return cls(parts.hostname, parts.port or 80, authorization, names)

    def bypasses(self, host: str) -> bool:
        host = host.lower()
        return any(name in ("*", host) or host.endswith("." + name) for name in self.bypass)


@dataclass
class _Listener:
    """One command's socket, and what it refused (at most MAX_REFUSALS distinct hosts)."""

    server: asyncio.AbstractServer | None = None  # once it listens
    refused: dict[tuple[str, int], Refusal] = field(default_factory=dict)
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CONNECTIONS))


class EgressProxy:
    """One run's proxy: `listen()` gives each command (a lane, a check) a socket of its own,
    so what is refused is told per command."""

    def __init__(
        self,
        rules: HostRules,
        *,
        upstream: Upstream | None = None,
        hosts: Mapping[str, str] | None = None,
        key: str = "lane_network",
    ) -> None:
        self.rules = rules
        self.key = key  # the config key the list is under (what a refusal names)
        self._upstream = upstream
        self._hosts = {name.lower(): address for name, address in (hosts or {}).items()}
        self._folder = Path(tempfile.mkdtemp(prefix="imm-egress-"))  # 0700, imm's alone
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="imm-egress",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        self._listeners: dict[Path, _Listener] = {}
        self._count = 0
        self._counting = threading.Lock()

    def listen(self) -> Path:
        """A new socket for one command; `stop` it after."""
        with self._counting:
            self._count += 1
            path = self._folder / f"{self._count}.sock"
        self._call(self._listen(path))
        return path

    def stop(self, socket: Path) -> list[Refusal]:
        """`socket` closed; what its command was refused, in the order first asked."""
        with self._counting:
            listener = self._listeners.pop(socket, None)
        if listener is None:
            return []
        if listener.server is not None:
            self._call(_closed(listener.server))
        return sorted(listener.refused.values(), key=lambda r: r.first)

    def close(self) -> None:
        for socket in list(self._listeners):
            self.stop(socket)
        self._call(_cancel_the_rest())  # connections still open end with the run
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _call(self, coroutine: object) -> object:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()  # type: ignore[arg-type]

    async def _listen(self, path: Path) -> None:
        listener = _Listener()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if listener.slots.locked():
                await _answer(writer, 503, "imm: too many connections at once")
                return
            async with listener.slots:
                try:
                    await self._serve(listener, reader, writer)
                finally:
                    writer.close()

        listener.server = await asyncio.start_unix_server(serve, path=str(path), limit=MAX_HEAD)
        os.chmod(path, 0o600)
        with self._counting:
            self._listeners[path] = listener

    async def _serve(
        self, listener: _Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.rpartition(" ")[0]
        if method == "CONNECT":
            try:
                host, port = split_host_port(target)
            except ValueError:  # a port past 65535, or none a number
                host, port = None, None
            send = b""
        else:
            url = urlsplit(target)
            try:
                port = _port(url.port, 80)
            except ValueError:  # a port past 65535, or none a number
                port = None
            if url.scheme != "http" or not url.hostname:
                await _answer(writer, 400, "imm: a proxy request is CONNECT or an http:// URL")
                return
            host = url.hostname
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            kept = [line for line in lines[1:] if line
                    and line.partition(":")[0].strip().lower() not in _DROPPED_HEADERS]  # fmt: skip
            send = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""]
                               ).encode("latin-1")  # fmt: skip
        if host is None or port is None or not valid_host(host):
            await _answer(writer, 400, "imm: a proxy request names a host and port")
            return
        if not self.rules.admits(host, port):
            self._refuse(listener, host, port)
            await _answer(writer, 403, f"imm: {refused_line(self.key, host, port)}")
            return
        try:
            upstream_reader, upstream_writer = await self._open(host, port)
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
        ) as error:
            await _answer(writer, 502, f"imm: {host}:{port} could not be reached: {error!r}")
            return
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream_writer.write(send)
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            upstream_writer.close()

    async def _open(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        address = self._hosts.get(host.lower().rstrip("."), host)
        upstream = self._upstream
        if upstream is None or upstream.bypasses(host):
            return await asyncio.open_connection(address, port)
        reader, writer = await asyncio.open_connection(upstream.host, upstream.port)
        asked = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        auth = (
            f"Proxy-Authorization: {upstream.authorization}\r\n" if upstream.authorization else ""
        )
        writer.write(f"CONNECT {asked} HTTP/1.1\r\nHost: {asked}\r\n{auth}\r\n".encode())
        reply = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        status = reply.split(b" ", 2)[1:2]
        if status != [b"200"]:
            writer.close()
            raise OSError(f"the upstream proxy answered {reply.splitlines()[0].decode('latin-1')}")
        return reader, writer

    def _refuse(self, listener: _Listener, host: str, port: int) -> None:
        key = (host.lower().rstrip("."), port)
        known = listener.refused.get(key)
        if known is not None:
            known.count += 1
        elif len(listener.refused) < MAX_REFUSALS:
            listener.refused[key] = Refusal(key[0], port, time.time())


def _port(port: int | None, default: int | None) -> int | None:
    if port is None:
        return default
    return port if 1 <= port <= 65535 else None


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway",
               503: "Service Unavailable"}  # fmt: skip
    body = (text + "\n").encode()
    head = (f"HTTP/1.1 {status} {reasons[status]}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
    writer.write(head.encode() + body)
    with contextlib.suppress(OSError):
        await writer.drain()
    writer.close()


async def _pipe(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    """`source` into `target` until its end, then `target`'s write side closed (the other
    direction may still be talking)."""
    with contextlib.suppress(OSError):
        while chunk := await source.read(_CHUNK):
            target.write(chunk)
            await target.drain()
        if target.can_write_eof():
            target.write_eof()


async def _cancel_the_rest() -> None:
    here = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not here]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


async def _closed(server: asyncio.AbstractServer) -> None:
    server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(server.wait_closed(), 1.0)


@dataclass
class CommandReach:
    """One command's network, and (once it ended) the hosts the proxy refused it."""

    network: NetworkAccess
    refused: list[Refusal] = field(default_factory=list)

    @property
    def blocked(self) -> list[str]:
        """Each refused `host:port` once, in the order first asked."""
        return [refusal.address for refusal in self.refused]


class NetworkReach:
    """What one kind of lane code reaches (`lane_network` for executors and `lane_setup`,
    `check_network` for checks and `check_setup`): the host's network, none, or the hosts of
    a list through one proxy for the run. Unconfined, a list cannot be held to: the host's
    network, and `unheld` says why."""

    def __init__(
        self,
        policy: NetworkMode | list[str],
        key: str,
        *,
        confined: bool,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        self.policy = policy
        self.key = key
        rules = rules_of(policy)
        self.unheld = rules is not None and not confined
        self._rules = rules if confined else None
        self._upstream = Upstream.from_environment(environ)
        self._hosts = hosts_file(environ.get(HOSTS_VARIABLE)) if self._rules is not None else {}
        self._proxy: EgressProxy | None = None
        self._owner = os.getpid()  # the process `_proxy` runs in
        self._starting = threading.Lock()

    @property
    def listed(self) -> bool:
        """Whether commands reach a list's hosts through the proxy."""
        return self._rules is not None

    @contextlib.contextmanager
    def command(self) -> Iterator[CommandReach]:
        """One command's network while it runs; its refusals after."""
        if self._rules is None:
            yield CommandReach(self.policy != "none")
            return
        proxy = self._proxy_here(self._rules)
        socket = proxy.listen()
        reach = CommandReach(Egress(socket))
        try:
            yield reach
        finally:
            reach.refused = proxy.stop(socket)

    def _proxy_here(self, rules: HostRules) -> EgressProxy:
        """This process's proxy, started at its first command. A process forked from the one
        that made this (a lane `imm run` forks) has none of its threads: it never touches the
        parent's proxy (whose loop would never answer) and starts its own."""
        if self._owner != os.getpid():  # forked: the parent's proxy and lock are not ours
            self._owner, self._proxy, self._starting = os.getpid(), None, threading.Lock()
        with self._starting:
            if self._proxy is None:
                self._proxy = EgressProxy(rules, upstream=self._upstream, hosts=self._hosts,
                                          key=self.key)  # fmt: skip
            return self._proxy

    def close(self) -> None:
        """This process's proxy ended (a forked process leaves its parent's alone)."""
        if self._proxy is not None and self._owner == os.getpid():
            self._proxy.close()
        self._proxy = None


def refusal_lines(key: str, refused: list[Refusal]) -> list[str]:
    """What a log says of each refusal: when first, how often, and the line that allows it."""
    lines = []
    for refusal in refused:
        when = time.strftime("%H:%M:%S", time.gmtime(refusal.first))
        times = "once" if refusal.count == 1 else f"{refusal.count} times"
        lines.append(f"refused at {when} UTC ({times}): "
                     f"{refused_line(key, refusal.host, refusal.port)}")  # fmt: skip
    return lines


HOSTS_VARIABLE = "IMM_PROXY_HOSTS"  # a hosts file the proxy resolves names by first


def hosts_file(path: str | None) -> dict[str, str]:
    """`address name...` lines (the format of /etc/hosts) as name -> address."""
    if not path:
        return {}
    names: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            names.setdefault(name.lower(), fields[0])
    return names
