"""The fake GitHub's HTTP side: authentication, rate-limit headers, pagination, faults and a
request log around the routes. Responses follow GitHub's status codes and error texts."""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fake_github.faults import Fault, FaultPlan
from tests.fake_github.routes import ROUTES, ApiError, Call, Redirect, workflow_job, workflow_run
from tests.fake_github.state import FakeRepo, FakeState, now_iso

# The listings GitHub pages inside an object that the product reads page by page.
_PAGED_IN_OBJECT = ("jobs", "artifacts")

DOCS = "https://docs.github.com/rest"
SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)

GRAPHQL_TIMEOUT = (
    "Something went wrong while executing your query. This may be the result of a timeout, "
    "or it could be a GitHub bug. Please include `ABCD:1234` when reporting this issue."
)


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    status: int
    fault: Fault | None
    query: str = ""  # as sent, for the check of every call against GitHub's description
    body: bytes = b""


# Every request any fake served in this process since the list was last cleared (the tests'
# conftest checks each test's REST calls against GitHub's OpenAPI description).
SERVED_REQUESTS: list[LoggedRequest] = []


@dataclass(frozen=True)
class ServedResponse:
    """A response as the contract test checks it: which documented operation, what it sent."""

    method: str
    template: str
    status: int
    payload: Any


class FakeGitHub:
    """`with FakeGitHub() as github:` serves on 127.0.0.1 at `github.url` until the block ends."""

    def __init__(self, tokens: dict[str, str] | None = None, rate_limit: int = 5000) -> None:
        self.tokens = tokens or {"test-token": "imm-bot"}  # token -> login it acts as
        self.state = FakeState()
        self.faults = FaultPlan()
        self.requests: list[LoggedRequest] = []
        self.served: list[ServedResponse] = []
        self._graphql_api: Any = None
        self.rate_limit = rate_limit
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> FakeGitHub:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> str:
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.state.base_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- arranging the world ---------------------------------------------------------------
    def add_repo(self, full_name: str, collaborators: dict[str, str] | None = None) -> FakeRepo:
        owner, name = full_name.split("/")
        with self._lock:
            repo = self.state.add_repo(owner, name)
            repo.collaborators.update(collaborators or {owner: "admin"})
            return repo

    def add_workflow(
        self,
        full_name: str,
        file_name: str,
        name: str | None = None,
        inputs: Mapping[str, bool] | None = None,
    ) -> None:
        """A workflow; `inputs` (name -> required) are its `workflow_dispatch` inputs, which a
        dispatch must respect as GitHub does (422 otherwise); None accepts any inputs."""
        repo = self.repo(full_name)
        if inputs is not None:
            repo.dispatch_inputs[file_name] = dict(inputs)
        with self._lock:
            workflow_id = self.state.next_id()
            path = f".github/workflows/{file_name}"
            workflow = {
                "id": workflow_id, "node_id": f"W_{workflow_id}", "name": name or file_name,
                "path": path, "state": "active", "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
                "url": self.state.api(f"/repos/{full_name}/actions/workflows/{workflow_id}"),
                "html_url": f"https://github.example/{full_name}/blob/main/{path}",
                "badge_url": f"https://github.example/{full_name}/workflows/{file_name}/badge.svg",
            }  # fmt: skip
            repo.workflows[file_name] = workflow
            repo.workflows[str(workflow_id)] = workflow

    def add_tracker_initiative(self, full_name: str, slug: str, extra_body: str = "") -> int:
        """An Initiative issue in the immune-brain tracker protocol; returns its number."""
        repo = self.repo(full_name)
        body = (
            "<!-- immune-brain-tracker:v1 -->\n<!-- immune-brain:kind=initiative -->\n"
            f"<!-- immune-brain:repo-id={repo.id} -->\n<!-- immune-brain:initiative-id={slug} -->\n"
            + extra_body
        )
        with self._lock:
            return int(self.state.new_issue(repo, f"Initiative {slug}", body, repo.owner)["number"])

    def add_tracker_task(
        self, full_name: str, parent: int, slug: str, task_id: str, **markers: str
    ) -> int:
        """A Task sub-issue of `parent`; `markers` override (or, empty, drop) its markers."""
        fields = {"kind": "task", "task-id": task_id, "slice-id": f"s-{task_id}",
                  "initiative-id": slug, **markers}  # fmt: skip
        body = "\n".join(f"<!-- immune-brain:{k}={v} -->" for k, v in fields.items() if v)
        repo = self.repo(full_name)
        with self._lock:
            number = int(self.state.new_issue(repo, task_id, body, repo.owner)["number"])
        self.link_sub_issue(full_name, parent, number)
        return number

    def link_sub_issue(self, full_name: str, parent: int, child: int) -> None:
        with self._lock:
            self.repo(full_name).sub_issues.setdefault(parent, []).append(child)

    def link_blocked_by(self, full_name: str, issue: int, blocker: int) -> None:
        with self._lock:
            self.repo(full_name).blocked_by.setdefault(issue, []).append(blocker)

    def hide_from_search(self, full_name: str, number: int) -> None:
        """Issue `number` is not found by search yet (GitHub indexes new issues with a delay)."""
        with self._lock:
            self.repo(full_name).unindexed.add(number)

    def add_run(self, full_name: str, workflow_file: str = "imm-batch.yml") -> int:
        """A workflow run in progress (as if the workflow had been dispatched and started)."""
        repo = self.repo(full_name)
        with self._lock:
            run_id = self.state.next_id()
            run = workflow_run(self.state, repo, repo.workflows[workflow_file], "main", run_id)
            repo.runs[run_id] = {**run, "status": "in_progress"}
            return run_id

    def add_job(
        self, full_name: str, run_id: int, name: str, *, created_at: str | None = None
    ) -> int:
        """A queued job of a run (a matrix job gets a name like `lane (t1)`)."""
        repo = self.repo(full_name)
        with self._lock:
            job_id = self.state.next_id()
            run = repo.runs[run_id]
            job = workflow_job(
                self.state, repo, run, job_id, name=name, created_at=created_at or now_iso()
            )
            repo.jobs[job_id] = job
            return job_id

    def move_job(
        self, full_name: str, job_id: int, status: str, conclusion: str | None = None
    ) -> None:
        """Move a job along GitHub's lifecycle: in_progress, or completed with a conclusion."""
        if status not in ("queued", "in_progress", "completed", "waiting", "requested", "pending"):
            raise ValueError(f"GitHub has no job status {status!r}")
        if (status == "completed") != (conclusion is not None):
            raise ValueError("a job has a conclusion exactly when it is completed")
        with self._lock:
            job = self.repo(full_name).jobs[job_id]
            job.update(status=status, conclusion=conclusion)
            if status == "in_progress":
                job.update(started_at=now_iso(), runner_id=1, runner_name="GitHub Actions 1",
                           runner_group_id=1, runner_group_name="GitHub Actions")  # fmt: skip
            if status == "completed":
                job["completed_at"] = now_iso()

    def delete_run(self, full_name: str, run_id: int) -> None:
        """The run is gone (deleted, or past its retention): its jobs go with it."""
        repo = self.repo(full_name)
        with self._lock:
            del repo.runs[run_id]
            for job_id in [j for j, job in repo.jobs.items() if job["run_id"] == run_id]:
                del repo.jobs[job_id]

    def repo(self, full_name: str) -> FakeRepo:
        return self.state.repos[full_name]

    def requests_to(self, method: str, pattern: str) -> list[LoggedRequest]:
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    # -- serving -----------------------------------------------------------------------------
    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> _Response:
        split = urlsplit(target)
        path = split.path.rstrip("/") or "/"
        login = self._login(headers.get("authorization", ""))
        if login is None:
            return _error(401, "Bad credentials")
        if method == "POST" and path == "/graphql":
            return self._graphql(raw)
        if method == "GET" and path.startswith("/_blobs/"):
            return self._blob(path)
        for route_method, pattern, handler, template in ROUTES:
            if route_method != method:
                continue
            match = pattern.fullmatch(path)
            if match is None:
                continue
            try:
                body = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                return _error(400, "Problems parsing JSON")
            call = Call(
                self.state, login, match.groupdict(), body, parse_qs(split.query), self._lock
            )
            try:
                status, payload = handler(call)
            except ApiError as error:
                return _error(error.status, error.message, error.errors)
            if isinstance(payload, Redirect):
                with self._lock:
                    self.served.append(ServedResponse(method, template, status, None))
                return _Response(status, b"", {"Location": payload.location})
            response = self._paginate(status, payload, split.path, parse_qs(split.query))
            with self._lock:
                self.served.append(
                    ServedResponse(method, template, response.status, response.payload)
                )
            return response
        return _error(404, "Not Found")

    def _blob(self, path: str) -> _Response:
        """An artifact's zip at the storage URL an artifact download redirects to (not an API
        operation: GitHub's storage serves it)."""
        found = re.fullmatch(r"/_blobs/(?P<repo>[^/]+/[^/]+)/artifacts/(?P<id>[0-9]+)\.zip", path)
        repo = self.state.repos.get(found["repo"]) if found else None
        root = self.state.artifacts_root
        if found is None or repo is None or root is None:
            return _error(404, "Not Found")
        with self._lock:
            known = repo.artifacts.get(int(found["id"]))
        if known is None:
            return _error(404, "Not Found")
        folder = root / str(known[0]) / known[1]
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w") as archive:
            for file in sorted(folder.iterdir()):
                if file.is_file():
                    archive.write(file, file.name)
        return _Response(200, data.getvalue(), {"Content-Type": "application/zip"})

    def _graphql(self, raw: bytes) -> _Response:
        from tests.fake_github.graphql_api import GraphQLApi

        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            return _error(400, "Problems parsing JSON")
        with self._lock:
            if self._graphql_api is None:
                self._graphql_api = GraphQLApi(self.state)
            payload = self._graphql_api.execute(request.get("query", ""), request.get("variables"))
        return _Response(200, payload, {})

    def _login(self, authorization: str) -> str | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        return self.tokens.get(token.strip())

    def _paginate(
        self, status: int, payload: Any, path: str, query: dict[str, list[str]]
    ) -> _Response:
        # GitHub pages some listings inside an object: `{"total_count": n, "jobs": [...]}`.
        for key in _PAGED_IN_OBJECT:
            if isinstance(payload, dict) and isinstance(payload.get(key), list):
                paged = self._paginate(status, payload[key], path, query)
                return _Response(status, {**payload, key: paged.payload}, paged.headers)
        if not isinstance(payload, list):
            return _Response(status, payload, {})
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(payload) // per_page))
        links = []
        base = {key: values[0] for key, values in query.items() if key != "page"}

        def link(number: int, rel: str) -> str:
            params = "&".join(
                f"{key}={value}" for key, value in {**base, "page": str(number)}.items()
            )
            return f'<{self.url}{path}?{params}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        headers = {"Link": ", ".join(links)} if links else {}
        return _Response(status, payload[(page - 1) * per_page : page * per_page], headers)

    def log(
        self, method: str, target: str, status: int, fault: Fault | None, raw: bytes = b""
    ) -> None:
        split = urlsplit(target)
        logged = LoggedRequest(method, split.path, status, fault, split.query, raw)
        with self._lock:
            self.requests.append(logged)
            SERVED_REQUESTS.append(logged)

    def rate_headers(self) -> dict[str, str]:
        used = len(self.requests)
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, self.rate_limit - used)),
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Resource": "core",
        }


@dataclass(frozen=True)
class _Response:
    status: int
    payload: Any
    headers: dict[str, str]


def _error(status: int, message: str, errors: list[Any] | None = None) -> _Response:
    payload: dict[str, Any] = {"message": message, "documentation_url": DOCS, "status": str(status)}
    if errors:
        payload["errors"] = errors
    return _Response(status, payload, {})


def _handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            fault = fake.faults.next()
            if fault is Fault.RESET:
                fake.log(self.command, self.path, 0, fault, raw)
                self._drop()
                return
            if fault is Fault.SLOW:
                time.sleep(0.3)
            injected = _injected_response(fault)
            headers = {key.lower(): value for key, value in self.headers.items()}
            response = injected or fake.handle(self.command, self.path, headers, raw)
            fake.log(self.command, self.path, response.status, fault, raw)
            if fault is Fault.RESET_AFTER_WRITE:
                self._drop()
                return
            self._send(response)

        def _send(self, response: _Response) -> None:
            binary = isinstance(response.payload, bytes)
            if response.status == 204:
                body = b""
            else:
                body = response.payload if binary else json.dumps(response.payload).encode()
            self.send_response(response.status)
            if "Content-Type" not in response.headers:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            for key, value in {**fake.rate_headers(), **response.headers}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _drop(self) -> None:
            # A reset, not a clean close: what a flaky proxy in front of GitHub does.
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.close_connection = True
            self.connection.close()

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve  # noqa: N815 - stdlib names

    return Handler


def _injected_response(fault: Fault | None) -> _Response | None:
    match fault:
        case Fault.SERVER_ERROR:
            return _error(500, "Server Error")
        case Fault.BAD_GATEWAY:
            return _error(502, "Server Error")
        case Fault.TOO_MANY_REQUESTS:
            return _Response(
                429,
                {"message": "Too Many Requests", "documentation_url": DOCS},
                {"Retry-After": "1"},
            )
        case Fault.SECONDARY_RATE_LIMIT:
            payload = {"message": SECONDARY_LIMIT_MESSAGE, "documentation_url": DOCS}
            return _Response(403, payload, {"Retry-After": "1"})
        case Fault.BAD_REQUEST:
            return _error(400, "Problems parsing JSON")
        case Fault.GRAPHQL_TIMEOUT:
            return _Response(200, {"data": None, "errors": [{"message": GRAPHQL_TIMEOUT}]}, {})
        case Fault.SECONDARY_RATE_LIMIT_BARE:
            return _Response(
                403, {"message": SECONDARY_LIMIT_MESSAGE, "documentation_url": DOCS}, {}
            )
        case _:
            return None


Handler = Callable[[Call], tuple[int, Any]]
