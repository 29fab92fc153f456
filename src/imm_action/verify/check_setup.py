"""Where integration checks run, and the environment `check_setup` prepares for them
(decisions 0031, 0032).

`CheckPlace` is chosen once per job or `imm run`: the isolation (isolation.py), the folder its
checks live in, and the config's `check_setup`. Setup runs once, before the first check, as the
checks run (the same user, the same namespace), in a checkout of the base — never of a lane's
candidate — with the network settings an installer needs. What it leaves in its home (a venv
at `$HOME/.venv`, `pip install --user` into `$HOME/.local`) is then imm's and read-only: every
check runs with that home and those folders first on its PATH, and its own fresh temp and
cache folders. A forked worker finds setup done through the files it left (`setup.json`)."""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import DescriptorCommand
from imm_action.model.outcome import CheckResult
from imm_action.verify.isolation import CheckArea, Isolation
from imm_action.verify.sandbox import Sandbox, run_command
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
_NETWORK_PREFIXES = ("PIP_", "UV_", "NPM_CONFIG_")
_RECORD = "setup.json"


@dataclass(frozen=True)
class Prepared:
    """What checks run with: the home setup prepared (None: none ran) and the PATH."""

    home: Path | None
    path_env: str


@dataclass
class CheckPlace:
    """Where one command's integration checks run (isolation, area) and what they run with
    (`check_setup`, run once by `prepared`)."""

    isolation: Isolation
    area: CheckArea | None  # where isolated checks live; None: the repository's pool
    path_env: str
    setup: str | None = None  # the base config's check_setup
    setup_tree: str | None = None  # the commit setup runs in (the base)
    folder: Path | None = None  # where setup's home and record lie
    log: Callable[[str], None] | None = None
    # the verifier's threads ask at once: one of them makes the folder
    _making: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def close(self) -> None:
        """The checks' folder and setup's home removed (the run is over)."""
        if self.area is not None:
            self.area.remove()
        elif self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def prepared(self, repo: GitRepo) -> Prepared | CheckResult:
        """What checks run with, setup run first if it has not run yet; its failing result
        when it failed (every check then fails with it)."""
        if self.setup is None or self.setup_tree is None:
            return Prepared(None, self.path_env)
        folder = self._folder()
        with open(folder / "lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one runner of setup, even across the fork
            record = folder / _RECORD
            if not record.exists():
                result = self._run(repo, folder / "home")
                record.write_text(result.model_dump_json())
                if self.log is not None:
                    how = "passed" if result.passed else f"failed ({_ending(result)})"
                    self.log(f"check_setup {how} in {result.duration_ms / 1000:.1f} s")
            found = CheckResult.model_validate_json(record.read_text())
        if not found.passed:
            return found
        home = folder / "home"
        path = os.pathsep.join([str(home / ".venv" / "bin"), str(home / ".local" / "bin"),
                                self.path_env])  # fmt: skip
        return Prepared(home, path)

    def _folder(self) -> Path:
        with self._making:
            return self._made_folder()

    def _made_folder(self) -> Path:
        if self.folder is None:
            base = self.area.root if self.area is not None else None
            self.folder = Path(tempfile.mkdtemp(prefix="imm-check-setup-", dir=base))
            os.chmod(self.folder, 0o711)
        return self.folder

    def _run(self, repo: GitRepo, home: Path) -> CheckResult:
        home.mkdir(mode=0o711)
        user = self.isolation.user
        argv = shlex.split(self.setup or "")
        command = DescriptorCommand(executable=argv[0], argv=argv[1:], timeout_ms=SETUP_TIMEOUT_MS)
        network = tuple(
            (name, value)
            for name, value in sorted(os.environ.items())
            if name in _NETWORK_NAMES or name.startswith(_NETWORK_PREFIXES)
        )
        pool = self.area.trees if self.area is not None else None
        with checked_out(repo, self.setup_tree or "", pool) as checkout:
            if user is not None:
                user.own(home)
            try:
                sandbox = Sandbox(checkout.root, home, self.path_env, lambda _: [], user=user,
                                  extra=network)  # fmt: skip
                with checkout.untrusted():
                    result = run_command(sandbox, "check_setup", command, ())
            finally:
                if user is not None:
                    user.take_back(home)  # read-only for the checks from now on
        return result


def _ending(result: CheckResult) -> str:
    if result.error:
        return result.error
    if result.timed_out:
        return "timed out"
    return f"exit {result.exit_code}"
