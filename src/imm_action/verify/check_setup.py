"""Where checks run, and the environment `check_setup` prepares for them (decisions 0032,
0048, 0067).

`CheckPlace` is chosen once per job or `imm run`: the sandbox (sandbox/choice.py) and the plan's
`check_setup`. It prepares the checks of the lanes and of the integrator alike. Setup runs in
the sandbox, in a checkout of the commit the plan was made from — never a lane's candidate nor
a batch head holding what lanes wrote — with the network settings an installer needs and the
user's package-manager settings (`~/.npmrc`, pip's config: setup runs the plan's trusted
config; lane code never sees them). Its result is kept under `<git common dir>/imm/setup/
<digest>`, the digest of the command, the plan's lockfiles, the PATH and where setup's home
and tree are seen, and reused by every later run while they are unchanged; on GitHub a job
restores it from actions/cache and saves it once it is `READY` (decision 0069):

- what it leaves in its home (a venv at `$HOME/.venv`, `pip install --user` into
  `$HOME/.local`) is on every check's PATH, shown read-only in each check's own home. In the
  sandbox setup sees that home at `SETUP_HOME_SEEN_AT`, as checks do, so what it installs
  names no path of this runner and works restored on another;
- what it leaves in its tree that git does not track (`node_modules`, an in-tree `.venv`,
  `vendor/`) is bound read-only at the same place in every check's tree. Every command sees
  its tree at one path (`Confinement.tree_at`), so a venv's scripts and an editable install
  made in setup's tree work in every check's;
- package managers' caches (`XDG_CACHE_HOME`, npm's) persist in `<git common dir>/imm/cache`.

Without `check_setup`, checks run with the caller's PATH (the user's own toolchain, read-only).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import DescriptorCommand
from imm_action.model.outcome import CheckResult
from imm_action.sandbox.confine import NOT_CONFINED, SETUP_HOME_SEEN_AT, Bind, Confinement
from imm_action.sandbox.proxy import NetworkReach
from imm_action.verify.command_run import Sandbox, run_command
from imm_action.verify.trees import checked_out

SETUP_TIMEOUT_MS = 600_000  # the longest a command model allows
# what an installer needs to reach its registry: proxies, certificate authorities, its settings
_NETWORK_NAMES = frozenset(
    {
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    }
)  # fmt: skip
_NETWORK_PREFIXES = ("PIP_", "UV_", "NPM_CONFIG_", "npm_config_", "YARN_")
# the files whose content decides what setup installs (at the base's root)
LOCKFILES = frozenset(
    {
        "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock",
        "pnpm-lock.yaml", "bun.lockb", "requirements.txt", "requirements-dev.txt",
        "constraints.txt", "pyproject.toml", "poetry.lock", "uv.lock", "Pipfile.lock",
        "setup.py", "setup.cfg", "Gemfile.lock", "go.mod", "go.sum", "Cargo.toml", "Cargo.lock",
        "composer.lock", "pom.xml", "build.gradle", "build.gradle.kts", "settings.gradle",
        "settings.gradle.kts", "gradle.lockfile", "mix.lock", "Package.resolved",
    }
)  # fmt: skip
# the user's package-manager settings: setup reads them where they are (never copied)
_SETTINGS = ((".npmrc", "NPM_CONFIG_USERCONFIG"), (".config/pip/pip.conf", "PIP_CONFIG_FILE"),
             (".pip/pip.conf", "PIP_CONFIG_FILE"))  # fmt: skip
_RECORD = "setup.json"
READY = "ready"  # in a folder whose setup passed and is whole (what a job may save)


class SetupRecord(BaseModel):
    """What one setup left: its result, and the untracked paths it made in its tree."""

    result: CheckResult
    left_in_tree: list[str] = []
    run: str = ""  # the run a failed setup belongs to (a pass is reused by every run)


@dataclass(frozen=True)
class Prepared:
    """What checks run with: the home setup prepared (None: none ran), the PATH, and what
    setup left in its tree, bound into every check's."""

    home: Path | None
    path_env: str
    binds: tuple[tuple[str, Path], ...] = ()  # (path in the tree, where it is kept)
    reused: bool = False


@dataclass
class CheckPlace:
    """Where one command's checks run (the sandbox) and what they run with (`check_setup`,
    run once per digest by `prepared`)."""

    confinement: Confinement
    path_env: str
    setup: str | None = None  # the base config's check_setup
    setup_tree: str | None = None  # the commit setup runs in (the base)
    log: Callable[[str], None] | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # what checks and check_setup reach (`check_network`; None: the confinement's own word)
    reach: NetworkReach | None = None
    _found: Prepared | None = field(default=None, repr=False)
    # the verifier's threads ask at once: one of them looks
    _looking: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def close(self) -> None:
        """The run is over (what setup prepared stays for the next run)."""
        self.confinement.close()
        if self.reach is not None:
            self.reach.close()

    def prepared(self, repo: GitRepo) -> Prepared | CheckResult:
        """What checks run with, setup run first where it has not run for this digest; its
        failing result when it failed (every check then fails with it)."""
        if self.setup is None or self.setup_tree is None:
            return Prepared(None, self.path_env)
        with self._looking:
            if self._found is not None:
                return self._found
            found = self._prepare(repo)
            if isinstance(found, Prepared):
                self._found = found
            return found

    def folder(self, repo: GitRepo) -> Path | None:
        """Where setup's result for this digest is kept (None: no `check_setup`): what a
        GitHub job restores from actions/cache before its checks, and saves after them when
        `READY` is in it (issue 62 #6)."""
        if self.setup is None or self.setup_tree is None:
            return None
        return repo.common_directory() / "imm" / "setup" / self._digest(repo)

    def _prepare(self, repo: GitRepo) -> Prepared | CheckResult:
        folder = self.folder(repo)
        if folder is None:  # `prepared` asks only with setup set
            return Prepared(None, self.path_env)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one runner of setup, across processes too
            record = _read_record(folder / _RECORD)
            # a passed setup is whole only once READY is written (a restored cache, a run
            # killed after its record): without it, setup runs again
            whole = record is not None and record.result.passed and (folder / READY).exists()
            reused = whole or (record is not None and record.run == self.run_id)
            if record is None or not reused:
                (folder / READY).unlink(missing_ok=True)
                record = self._run(repo, folder)
                (folder / _RECORD).write_text(record.model_dump_json())
                if record.result.passed:  # written last: a folder with it is whole
                    (folder / READY).touch()
                if self.log is not None:
                    result = record.result
                    how = "passed" if result.passed else f"failed ({_ending(result)})"
                    self.log(f"check_setup {how} in {result.duration_ms / 1000:.1f} s")
            elif self.log is not None and record.result.passed:
                self.log("check_setup: reused what it prepared before (lockfiles unchanged)")
        _prune(folder.parent, keep=folder)
        if not record.result.passed:
            return record.result
        home = folder / "home"
        path = os.pathsep.join([str(home / ".venv" / "bin"), str(home / ".local" / "bin"),
                                self.path_env])  # fmt: skip
        kept = tuple((name, folder / "tree" / name) for name in record.left_in_tree)
        return Prepared(home, path, kept, reused)

    def _digest(self, repo: GitRepo) -> str:
        """Of what decides setup's result: the command, the base's lockfiles, the PATH and
        where trees are seen."""
        entries = repo.tree_entries(self.setup_tree or "", sorted(LOCKFILES), recursive=False)
        parts = [self.setup or "", self.path_env, self._seen_from(repo),
                 *(f"{path}={entry.oid}" for path, entry in sorted(entries.items()))]  # fmt: skip
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

    def _setup_reach(self) -> NetworkReach | None:
        """Setup's network: a `check_network` list's hosts; else the host's — `none` cuts the
        checks' alone, as `false` always did: an installer needs its registry."""
        return self.reach if self.reach is not None and self.reach.listed else None

    def _seen_from(self, repo: GitRepo) -> str:
        """Where setup's home and tree are seen, which what it installs names: in the sandbox
        the same paths on every runner (what a GitHub job restores works in the next); else
        their own, in this repository's folder."""
        if self.confinement.active:
            return f"{SETUP_HOME_SEEN_AT}:{self.confinement.tree_at}"
        return str(repo.common_directory())

    def _run(self, repo: GitRepo, folder: Path) -> SetupRecord:
        for part in ("home", "tree"):
            shutil.rmtree(folder / part, ignore_errors=True)
            (folder / part).mkdir()
        home = folder / "home"
        argv = shlex.split(self.setup or "")
        command = DescriptorCommand(executable=argv[0], argv=argv[1:], timeout_ms=SETUP_TIMEOUT_MS)
        cache = repo.common_directory() / "imm" / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        extra, binds = _installer_settings(cache)
        with checked_out(repo, self.setup_tree or "") as checkout:
            sandbox = Sandbox(checkout.root, home, self.path_env, lambda _: [],
                              confinement=self.confinement, extra=extra,
                              binds=(Bind(cache, str(cache), writable=True), *binds),
                              home_at=SETUP_HOME_SEEN_AT, reach=self._setup_reach(),
                              log=self.log)  # fmt: skip
            with checkout.untrusted():
                result = run_command(sandbox, "check_setup", command, ())
            left: list[str] = []
            if result.passed:
                left = _keep_what_it_left(checkout.untracked(), checkout.root, folder / "tree")
        return SetupRecord(result=result, left_in_tree=left, run=self.run_id)


def _installer_settings(
    cache: Path,
) -> tuple[tuple[tuple[str, str], ...], tuple[Bind, ...]]:
    """Setup's network settings, its package managers' caches in imm's cache, and the user's
    package-manager settings (shown to setup where the sandbox hides them)."""
    network = {
        name: value
        for name, value in sorted(os.environ.items())
        if name in _NETWORK_NAMES or name.startswith(_NETWORK_PREFIXES)
    }
    network.update({"XDG_CACHE_HOME": str(cache / "xdg"), "npm_config_cache": str(cache / "npm"),
                    "YARN_CACHE_FOLDER": str(cache / "yarn")})  # fmt: skip
    binds = []
    home = Path(os.environ.get("HOME") or Path.home())
    for relative, variable in _SETTINGS:
        settings = home / relative
        if settings.is_file() and variable not in network:
            network[variable] = str(settings)
            binds.append(Bind(settings, str(settings)))
    return tuple(network.items()), tuple(binds)


def _keep_what_it_left(untracked: list[str], root: Path, kept: Path) -> list[str]:
    """The paths git does not track that setup made in its tree (a folder named once, as
    `ls-files --directory` names it), moved to `kept`."""
    names = sorted({path.rstrip("/") for path in untracked if path.strip("/")})
    for name in names:
        (kept / name).parent.mkdir(parents=True, exist_ok=True)
        os.rename(root / name, kept / name)
    return names


def _prune(setups: Path, keep: Path) -> None:
    """Only the newest prepared environments stay (`keep` always); one another run is using
    holds its lock and is passed over."""
    kept = sorted(setups.iterdir(), key=lambda p: _mtime(p / _RECORD), reverse=True)
    for old in [p for p in kept if p != keep][KEEP_SETUPS - 1 :]:
        with open(old / "lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(old, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read_record(path: Path) -> SetupRecord | None:
    try:
        return SetupRecord.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def _ending(result: CheckResult) -> str:
    if result.error:
        return result.error
    if result.timed_out:
        return "timed out"
    return f"exit {result.exit_code}"


def unconfined_place(path_env: str) -> CheckPlace:
    """Checks with no sandbox and no setup (a lane job's own checks before a place is chosen,
    benchmarks)."""
    return CheckPlace(NOT_CONFINED, path_env)


@contextlib.contextmanager
def scratch_folder(repo: GitRepo) -> Iterator[Path]:
    """A fresh folder for a group of checks' home, temp and cache, named for this process and
    removed when done (a killed run's are removed by the next run: `remove_left_by_dead`)."""
    root = scratch_root(repo)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def scratch_root(repo: GitRepo) -> Path:
    return repo.common_directory() / "imm" / "scratch"


SCRATCH_PREFIX = "p"
KEEP_SETUPS = 3  # prepared environments kept (the newest), for branches with other lockfiles
