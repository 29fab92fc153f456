"""The sandbox by allowlist (issue 43, ADR 0059): lane code sees no home of the user's, no host
socket, not /tmp itself, and no program the sandbox hides — each tried by lane code that
reaches for it (tests/allowlist_probe.py) as an executor, a lane's check and an integration
check, beside an `imm run` that holds a token; with the checks' network on and off.

The home and the host folder lie outside /tmp and outside the tests' writable folder (a
private /tmp, or the operator's writable folder, would hide or show them for another reason):
in a scratch folder of the account's home, and under /var/lib. These tests need a kernel that
lets bubblewrap make namespaces, and root for /run and /var/lib: they skip on those facts about
the machine alone."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor
from tests.integration.test_sandbox import TOKEN, _namespaces_work

pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="the kernel refuses namespaces")

PROBE_SOURCE = Path(__file__).resolve().parents[1] / "allowlist_probe.py"
# what credential files a home holds that no list of names kept up with (issue 43 #1)
CREDENTIAL_FILES = (
    ".config/git/credentials", ".gitconfig", ".gemini/oauth_creds.json",
    ".config/github-copilot/hosts.json", ".cargo/credentials.toml", ".bash_history",
    ".copilot/config.json", ".cursor/mcp.json", ".aider.conf.yml", ".gem/credentials",
    ".m2/settings.xml", ".gradle/gradle.properties", ".yarnrc.yml", ".composer/auth.json",
    ".vault-token", ".password-store/github.gpg", ".local/share/keyrings/login.keyring",
    ".ssh/id_ed25519",
)  # fmt: skip


# Issue 59: what lay outside the homes, or beside a tool on PATH, and was read (each holds a
# secret). `{opt}` is a folder under /opt the test makes, `{lib}` one under /var/lib.
HOST_FILES = (
    "{opt}/r/.env",  # the repository's own working copy, under /opt: its gitignored .env
    "{opt}/actions-runner/.credentials",  # a self-hosted runner's registration
    "{lib}/private/key",  # a 0600 file in a 0700 folder under /var/lib
)
TOOL_FILES = (  # under the home, beside a program PATH runs
    ".nvm/versions/node/v20/etc/npmrc", ".fly/config.yml", ".pulumi/credentials.json",
    ".virtualenvs/app/bin/postactivate", ".virtualenvs/postactivate",
)  # fmt: skip


def _plant_toolchains(home: Path) -> str:
    """A version-manager node and npm (nvm's layout), flyctl, pulumi and a virtualenvwrapper
    venv under `home`, each with the credential file its tool keeps beside it; their PATH."""
    node = home / ".nvm" / "versions" / "node" / "v20"
    (node / "bin").mkdir(parents=True)
    (node / "lib" / "node_modules").mkdir(parents=True)
    real_node = os.path.realpath(shutil.which("node") or "/usr/bin/node")
    try:
        os.link(real_node, node / "bin" / "node")  # 99 MB: linked where it can be
    except OSError:
        shutil.copy2(real_node, node / "bin" / "node")
    npm = Path(os.path.realpath(shutil.which("npm") or "/usr/bin/npm")).parents[1]
    (node / "lib" / "node_modules" / "npm").symlink_to(npm)
    (node / "bin" / "npm").symlink_to("../lib/node_modules/npm/bin/npm-cli.js")
    for tool in (".fly/bin/flyctl", ".pulumi/bin/pulumi"):
        (home / tool).parent.mkdir(parents=True)
        (home / tool).write_text("#!/bin/sh\necho tool\n")
        (home / tool).chmod(0o755)
    venv = home / ".virtualenvs" / "app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return os.pathsep.join([str(node / "bin"), str(home / ".fly/bin"),
                            str(home / ".pulumi/bin"), str(venv / "bin")])  # fmt: skip


# An executor that does its task and nothing else.
WRITER = "import os, pathlib; t = os.environ['IMM_TASK_ID']; pathlib.Path(t + '.txt').write_text(t)"


def _imm_run(repo: Path, *more: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`imm run` of `repo` with the plain writer as its executor, `env` over the tests'."""
    return subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
         "--executor", shlex.join([sys.executable, "-c", WRITER]), *more],
        env={**os.environ, **env}, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def _account_home() -> Path:
    import pwd

    return Path(pwd.getpwuid(os.geteuid()).pw_dir)


class _Listener:
    """A unix socket the test listens on; `reached` once anything connected."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reached = False
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        os.chmod(path, 0o660)
        self.server.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.reached = True
            connection.close()

    def close(self) -> None:
        self.server.close()


_RUNS: dict[bool, dict[str, Any]] = {}


@pytest.fixture(params=[True, False], ids=["network on", "network off"])
def reached(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One `imm run` of `spy` (whose executor and check reach) and `slow`, by root, with a
    token; once per network setting for the tests of this module."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a socket under /run, a folder under /var/lib")
    network: bool = request.param
    if network in _RUNS:
        yield _RUNS[network]
        return
    tag = uuid.uuid4().hex[:12]
    out = tmp_path_factory.mktemp("allow") / "out"
    out.mkdir()
    home = Path(tempfile.mkdtemp(prefix="imm-test-home-", dir=_account_home()))
    run_folder = Path(f"/run/imm-test-{tag}")  # the runtime folder: XDG_RUNTIME_DIR
    other_run = Path(f"/run/imm-test-other-{tag}")
    host = Path(f"/var/lib/imm-test-{tag}")
    # the repository's working copy lies under /opt, as a self-hosted runner's does
    opt = root = Path(f"/opt/imm-test-{tag}")
    executor_file = Path(f"/tmp/imm-test-agent-{tag}.py")
    listeners: list[_Listener] = []
    try:
        path = _plant_toolchains(home)
        credentials = [home / name for name in (*CREDENTIAL_FILES, *TOOL_FILES)]
        credentials += [Path(name.format(opt=opt, lib=host)) for name in HOST_FILES]
        host.mkdir()
        host.chmod(0o777)
        for file in credentials:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(f"SECRET-{tag}-{file.name}")
            file.chmod(0o600)
        (host / "private").chmod(0o700)
        run_folder.mkdir(mode=0o770)
        # a socket folder under /run that no variable names: /run itself is private
        other_run.mkdir(mode=0o770)
        listeners = [_Listener(run_folder / "bus"), _Listener(Path(f"/tmp/imm-test-sock-{tag}")),
                     _Listener(other_run / "docker.sock")]  # fmt: skip
        shutil.copy(PROBE_SOURCE, executor_file)
        repo = make_project(
            root / "r", {"spy": [], "slow": []},
            scopes={"spy": ["spy.txt", "probe.py"]},
            checks={"spy": descriptor(["probe.py", str(out)])},
            extra_files={".github/imm.yml":
                         f"max_parallel: 2\ncheck_network: {'true' if network else 'false'}\n",
                         ".gitignore": ".env\n"},
        )  # fmt: skip
        toolchains = [["node", "-e", "process.stdout.write('node')"], ["npm", "--version"],
                      ["python3", "-c", "import sys; print(sys.prefix)"]]  # fmt: skip
        if shutil.which("pyenv"):  # the machine's pyenv, through its shim
            shims = Path(os.path.realpath(shutil.which("pyenv") or "")).parents[1] / "shims"
            toolchains.append([str(shims / "python3"), "-c", "print('pyenv')"])
        (out / "allow.json").write_text(json.dumps({
            "credentials": [str(file) for file in credentials],
            "sockets": [str(listener.path) for listener in listeners],
            "host_file": str(host / "planted"), "repo": str(repo), "toolchains": toolchains,
        }))  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
             "--executor", shlex.join(["python3", str(executor_file)])],
            env={**os.environ, "HOME": str(home), "GITHUB_TOKEN": TOKEN,
                 "PATH": f"{path}{os.pathsep}{os.environ['PATH']}",
                 "IMM_TEST_DIR": str(out), "SSH_AUTH_SOCK": str(listeners[0].path),
                 "XDG_RUNTIME_DIR": str(run_folder)},
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        found = [json.loads(path.read_text()) for path in sorted(out.glob("found-*.json"))]
        children = current(repo).state.children if done.returncode == 0 else []
        _RUNS[network] = {
            "states": {child.task_id: str(child.state) for child in children},
            "host_files": [name.format(opt=opt, lib=host) for name in HOST_FILES],
            "tool_files": [str(home / name) for name in TOOL_FILES],
            "done": done, "found": found, "repo": repo, "tag": tag,
            "sockets_reached": [str(li.path) for li in listeners if li.reached],
            "host_planted": (host / "planted").exists(),
        }  # fmt: skip
    finally:
        for listener in listeners:
            listener.close()
            listener.path.unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(run_folder, ignore_errors=True)
        shutil.rmtree(other_run, ignore_errors=True)
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(opt, ignore_errors=True)
        executor_file.unlink(missing_ok=True)
    yield _RUNS[network]


def _found(reached: dict[str, Any]) -> list[dict[str, Any]]:
    """What each role found: never none of them, or a test below would hold vacuously."""
    found: list[dict[str, Any]] = reached["found"]
    roles = [f["role"] for f in found]
    assert "executor" in roles, reached["done"].stderr[-3000:]
    assert "check" in roles, reached["done"].stderr[-3000:]
    return found


def test_the_reaching_lane_lands_and_every_role_reached(reached: dict[str, Any]) -> None:
    done = reached["done"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert reached["states"] == {"spy": "integrated", "slow": "integrated"}
    roles = [f["role"] for f in reached["found"]]
    # the lane's check, the integration check, and again on `slow`'s move (it holds `spy`)
    assert roles.count("executor") == 1
    assert roles.count("check") >= 2, roles


def test_no_credential_file_of_the_home_is_read(reached: dict[str, Any]) -> None:
    for found in _found(reached):
        assert found["credentials_read"] == {}, found["role"]


def test_no_file_outside_the_homes_is_read_the_working_copys_env_a_runners_credentials(
    reached: dict[str, Any],
) -> None:
    """Issue 59 #1, #2: the working copy under /opt, a runner's `.credentials`, a 0600 file
    under /var/lib."""
    for found in _found(reached):
        read = [path for path in found["credentials_read"] if path in reached["host_files"]]
        assert read == [], found["role"]


def test_no_credential_beside_a_tool_on_path_is_read(reached: dict[str, Any]) -> None:
    """Issue 59 #3: nvm's `etc/npmrc`, `~/.fly/config.yml`, `~/.pulumi/credentials.json`,
    virtualenvwrapper's `postactivate` hooks."""
    for found in _found(reached):
        read = [path for path in found["credentials_read"] if path in reached["tool_files"]]
        assert read == [], found["role"]


def test_toolchains_on_path_still_run_a_venv_pyenv_and_a_version_managers_node_and_npm(
    reached: dict[str, Any],
) -> None:
    """Issue 59: what the empty root shows is what the user's programs need."""
    for found in _found(reached):
        ran = found["toolchains"]
        assert all(code == 0 for code, _ in ran), (found["role"], ran)
        assert ran[0][1] == "node"
        assert ".virtualenvs/app" in ran[2][1]  # the venv first on PATH ran the check


def test_no_host_socket_is_reached_under_run_or_tmp(reached: dict[str, Any]) -> None:
    for found in _found(reached):
        assert found["sockets_connected"] == [], found["role"]
    assert reached["sockets_reached"] == []


def test_an_executor_named_in_tmp_is_shown_alone_not_tmp_with_it(
    reached: dict[str, Any],
) -> None:
    tag = reached["tag"]
    for found in _found(reached):
        assert f"imm-test-sock-{tag}" not in found["tmp_listing"], found["role"]
        others = [name for name in found["tmp_listing"] if name != f"imm-test-agent-{tag}.py"]
        assert not [name for name in others if name.startswith("imm-test-")], found


def test_no_host_file_outside_tmp_is_written(reached: dict[str, Any]) -> None:
    assert not reached["host_planted"]
    for found in _found(reached):
        assert found["host_written"] is False, found["role"]


def test_root_lane_code_holds_no_capability(reached: dict[str, Any]) -> None:
    for found in _found(reached):
        caps = found["caps"]
        assert int(caps["CapEff"], 16) == 0, (found["role"], caps)
        assert int(caps["CapBnd"], 16) == 0, (found["role"], caps)


def test_no_other_tree_of_the_pool_nor_the_overlay_base_is_reached(
    reached: dict[str, Any],
) -> None:
    for found in _found(reached):
        assert found["trees_reached"] == [], found["role"]


def test_a_checks_program_found_only_where_the_sandbox_hides_it_is_refused_naming_the_folder(
    tmp_path: Path,
) -> None:
    """Issue 43 #5: a setup step put `mytool` in `$RUNNER_TEMP/bin`, which the sandbox hides;
    bwrap said only `execvp mytool: No such file or directory`."""
    runner_temp = tmp_path / "runner-temp"
    (runner_temp / "bin").mkdir(parents=True)
    tool = runner_temp / "bin" / "mytool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    repo = make_project(tmp_path / "r", {"a": []},
                        checks={"a": descriptor([], executable="mytool")})  # fmt: skip
    done = _imm_run(repo, RUNNER_TEMP=str(runner_temp),
                    PATH=f"{runner_temp / 'bin'}{os.pathsep}{os.environ['PATH']}")  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"'mytool' is found on PATH only at {tool}" in said, said
    assert f"in {runner_temp}" in said
    assert "sandbox_expose" in said
    assert "execvp" not in said


def test_the_wheels_bwrap_runs_with_a_decoy_bwrap_first_on_imms_own_path(tmp_path: Path) -> None:
    """imm finds bubblewrap by the wheel's absolute path, never on PATH (issue 43 #8): a
    `bwrap` first on the PATH imm itself runs with never runs."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    ran = tmp_path / "decoy-ran"
    (decoy / "bwrap").write_text(f"#!/bin/sh\necho ran >> {ran}\nexit 1\n")
    (decoy / "bwrap").chmod(0o755)
    repo = make_project(tmp_path / "r", {"a": []})
    done = _imm_run(repo, PATH=f"{decoy}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lane code runs in a bubblewrap sandbox" in done.stdout + done.stderr
    assert not ran.exists()


@pytest.mark.parametrize(
    "lockfile", ["requirements.txt", "pom.xml", "build.gradle.kts", "Cargo.lock"]
)
def test_a_changed_lockfile_runs_check_setup_again(tmp_path: Path, lockfile: str) -> None:
    """The setup digest holds the base's lockfiles (issue 43 #8: without them, no test
    failed), of every ecosystem (issue 59: `pom.xml` and Gradle's did not count): a commit
    changing one prepares the environment anew."""
    count = tmp_path / "setup-runs"
    setup = f"sh -c 'echo x >> {count}'"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={
        ".github/imm.yml": f"check_setup: {setup}\n", lockfile: "pytest\n"})  # fmt: skip

    def run(*more: str) -> str:
        done = _imm_run(repo, *more)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    run()
    assert count.read_text() == "x\n"
    (repo / lockfile).write_text("pytest>=8\n")
    subprocess.run(["git", "commit", "-qam", "pin pytest"], cwd=repo, check=True)
    said = run("--fresh")
    assert "check_setup: reused" not in said
    assert count.read_text() == "x\nx\n"


def test_a_tool_a_version_manager_keeps_under_the_home_runs_in_checks_as_for_the_user(
    tmp_path: Path,
) -> None:
    """The homes are empty in the sandbox, but the toolchain `PATH` runs through is shown back
    (ADR 0059): a program of a version manager under the home (nvm's layout: its `bin` on
    PATH, its library beside it) runs in every check, while the home's credentials stay out."""
    home = Path(tempfile.mkdtemp(prefix="imm-test-home-", dir=_account_home()))
    try:
        version = home / ".nvm" / "versions" / "node" / "v20"
        (version / "bin").mkdir(parents=True)
        (version / "lib").mkdir()
        (version / "lib" / "runtime.txt").write_text("runtime\n")
        (version / "bin" / "vmtool").write_text(f"#!/bin/sh\nexec cat {version}/lib/runtime.txt\n")
        (version / "bin" / "vmtool").chmod(0o755)
        (home / ".config" / "git").mkdir(parents=True)
        (home / ".config" / "git" / "credentials").write_text("https://x:SECRET@github.com\n")
        reads = f'test "$(vmtool)" = runtime && ! cat {home}/.config/git/credentials'
        repo = make_project(tmp_path / "r", {"a": []},
                            checks={"a": descriptor(["-c", reads], executable="sh")})  # fmt: skip
        done = _imm_run(repo, HOME=str(home),
                        PATH=f"{version / 'bin'}{os.pathsep}{os.environ['PATH']}")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert [str(c.state) for c in current(repo).state.children] == ["integrated"]
    finally:
        shutil.rmtree(home, ignore_errors=True)
