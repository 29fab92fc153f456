"""The descriptor sandbox: no inherited environment, timeouts and output caps kill the whole
process group, and the tree under test must stay as it was outside writable_paths."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.verify.checks import Check, TreeJob, Verifier
from imm_action.verify.result_cache import ResultCache
from tests.conftest import git, make_repo


def _check(code: str, **command: object) -> Check:
    environment = command.pop("environment", None)
    body: dict[str, object] = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": ["-c", code], **command},
    }
    if environment is not None:
        body["environment"] = environment
    return Check("t:ok", parse_descriptor(json.dumps(body)))


@pytest.fixture
def tree(tmp_path: Path) -> tuple[GitRepo, str]:
    repo = make_repo(tmp_path / "r", {"src/app.py": "print('hi')\n", "build/keep": ""})
    return GitRepo(repo), git(repo, "rev-parse", "HEAD^{tree}").strip()


def _run(tree: tuple[GitRepo, str], check: Check) -> CheckResult:
    repo, oid = tree
    return Verifier(repo, ResultCache(), path_env=os.environ["PATH"]).verify(oid, [check])[0]


def test_a_passing_check_passes(tree: tuple[GitRepo, str]) -> None:
    result = _run(tree, _check("import pathlib; assert pathlib.Path('src/app.py').exists()"))
    assert result.passed
    assert result.exit_code == 0


def test_a_check_sees_none_of_the_callers_variables(
    tree: tuple[GitRepo, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_value")
    monkeypatch.setenv("IMM_SECRET", "also-secret")
    result = _run(
        tree, _check("import os; print(sorted(os.environ)); print(os.environ.get('GITHUB_TOKEN'))")
    )
    assert "ghs_secret_value" not in result.output_tail
    assert "IMM_SECRET" not in result.output_tail
    names = result.output_tail.splitlines()[0]
    for name in ("HOME", "PATH", "TMPDIR", "XDG_CACHE_HOME"):
        assert f"'{name}'" in names
    assert result.output_tail.splitlines()[1] == "None"


def test_a_check_runs_with_package_managers_update_notices_off(
    tree: tuple[GitRepo, str],
) -> None:
    """Issue 59 #5: npm's update notice filled the twelve lines of failure a report shows."""
    names = ("NPM_CONFIG_UPDATE_NOTIFIER", "NO_UPDATE_NOTIFIER", "PIP_DISABLE_PIP_VERSION_CHECK")
    code = f"import os; print(*(os.environ.get(name) for name in {names!r}))"
    assert _run(tree, _check(code)).output_tail.split() == ["false", "1", "1"]


def test_a_check_sleeping_past_its_timeout_is_killed_with_its_children(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess,sys,time;"
        f"p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
        f"open({str(marker)!r},'w').write(str(p.pid));"
        "time.sleep(60)"
    )
    started = time.monotonic()
    result = _run(tree, _check(code, timeout_ms=1500))
    assert time.monotonic() - started < 10
    assert (result.passed, result.timed_out, result.exit_code) == (False, True, None)
    child = int(marker.read_text())
    time.sleep(0.2)
    assert _gone(child)


# A check that starts a daemon in a session of its own (the daemon writes its pid once it runs,
# the check waits for that), then ends or sleeps.
DAEMON_STARTER = """
import os, subprocess, sys, time
marker, then = sys.argv[1], sys.argv[2]
daemon = "import os,sys,time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
subprocess.Popen([sys.executable, "-c", daemon, marker + ".tmp"], start_new_session=True)
while not os.path.exists(marker + ".tmp") or not open(marker + ".tmp").read():
    time.sleep(0.01)
os.rename(marker + ".tmp", marker)
if then == "sleep":
    time.sleep(60)
"""


def _daemon_check(tmp_path: Path, then: str, **command: object) -> tuple[Check, Path]:
    script = tmp_path / "starter.py"
    script.write_text(DAEMON_STARTER)
    marker = tmp_path / "daemon.pid"
    body = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": [str(script), str(marker), then], **command},
    }
    return Check("t:ok", parse_descriptor(json.dumps(body))), marker


def test_a_setsid_daemon_left_by_a_passing_check_is_killed_when_the_check_ends(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    check, marker = _daemon_check(tmp_path, "exit")
    result = _run(tree, check)
    assert result.passed, result
    assert _gone(int(marker.read_text()))


def test_a_setsid_daemon_of_a_check_that_times_out_is_killed_too(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    check, marker = _daemon_check(tmp_path, "sleep", timeout_ms=3000)
    result = _run(tree, check)
    assert result.timed_out
    assert _gone(int(marker.read_text()))


def _gone(pid: int) -> bool:
    """Dead, or a zombie waiting for a reaper (this sandbox's pid 1 may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_a_check_writing_past_its_output_cap_is_stopped(tree: tuple[GitRepo, str]) -> None:
    code = "import sys; [sys.stdout.write('x' * 1024) for _ in range(10_000)]"
    result = _run(tree, _check(code, max_output_bytes=65536))
    assert result.output_limited
    assert not result.passed


def test_writing_ten_megabytes_stops_at_the_cap(tree: tuple[GitRepo, str]) -> None:
    started = time.monotonic()
    result = _run(
        tree, _check("import sys; sys.stdout.write('y' * 10_000_000)", max_output_bytes=262144)
    )
    assert result.output_limited
    assert time.monotonic() - started < 10


def test_a_check_modifying_a_file_outside_writable_paths_fails(tree: tuple[GitRepo, str]) -> None:
    result = _run(tree, _check("open('src/app.py','a').write('# changed')"))
    assert result.exit_code == 0
    assert not result.passed
    assert result.changed_outside == ["src/app.py"]


def test_a_check_may_change_its_writable_paths_and_create_caches(tree: tuple[GitRepo, str]) -> None:
    code = (
        "import os; open('build/keep','w').write('x'); "
        "os.makedirs('src/__pycache__'); open('src/__pycache__/c','w')"
    )
    result = _run(tree, _check(code, environment={"writable_paths": ["build"]}))
    assert result.passed, result


def test_a_missing_tool_is_a_failure_with_a_reason(tree: tuple[GitRepo, str]) -> None:
    check = Check("t:ok", parse_descriptor(json.dumps({
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "no-such-tool-imm"},
    })))  # fmt: skip
    result = _run(tree, check)
    assert not result.passed
    assert result.error is not None
    assert result.error.startswith("'no-such-tool-imm' was not found on PATH; `check_setup`")


def test_a_failing_prepare_fails_its_group(tree: tuple[GitRepo, str]) -> None:
    environment = {"prepare": {"executable": "python3", "argv": ["-c", "raise SystemExit(3)"]}}
    result = _run(tree, _check("pass", environment=environment))
    assert not result.passed
    assert "prepare step failed" in (result.error or "")


def test_a_result_is_never_computed_twice_for_the_same_tree_and_descriptor(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    check = _check(f"open({str(counter)!r},'a').write('x')")
    repo, oid = tree
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"])
    verifier.verify_queued([TreeJob(oid, (check,)), TreeJob(oid, (check,))])
    verifier.verify(oid, [check])
    assert counter.read_text() == "x"


def test_tasks_sharing_a_descriptor_run_it_once_per_tree_each_under_its_own_check_id(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    counter = tmp_path / "runs"
    shared = _check(f"open({str(counter)!r},'a').write('x')")
    mine, sibling = Check("a:ok", shared.descriptor), Check("b:ok", shared.descriptor)
    repo, oid = tree
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"])
    results = verifier.verify(oid, [mine, sibling])
    assert counter.read_text() == "x"
    assert [(r.check_id, r.passed) for r in results] == [("a:ok", True), ("b:ok", True)]


def test_candidates_of_several_trees_verify_in_parallel(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    repo, _ = tree
    trees = []
    for index in range(3):
        (repo.path / f"f{index}").write_text(str(index))
        git(repo.path, "add", "-A")
        git(repo.path, "commit", "-qm", f"c{index}")
        trees.append(git(repo.path, "rev-parse", "HEAD^{tree}").strip())
    sleeper = _check("import time; time.sleep(1.0)")
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=3)
    started = time.monotonic()
    results = verifier.verify_queued([TreeJob(t, (sleeper,)) for t in trees])
    assert all(r[0].passed for r in results)
    assert time.monotonic() - started < 2.5  # three 1 s checks overlapped (serially: over 3 s)


def test_a_check_removing_a_file_outside_writable_paths_fails(tree: tuple[GitRepo, str]) -> None:
    result = _run(tree, _check("import os; os.remove('src/app.py')"))
    assert result.changed_outside == ["src/app.py"]
    assert not result.passed


def test_the_next_check_sees_a_clean_tree_whatever_the_last_one_left(
    tree: tuple[GitRepo, str],
) -> None:
    vandal = (
        "import os; open('src/app.py','w').write('x'); os.remove('build/keep'); "
        "open('src/junk','w'); os.makedirs('new/deep'); open('new/deep/f','w'); "
        "open('build/out','w')"
    )
    _run(tree, _check(vandal, environment={"writable_paths": ["build"]}))
    inspector = (
        "import os, sys; files = sorted(os.path.join(d, f)[2:] for d, _, fs in os.walk('.') "
        "for f in fs); ok = files == ['build/keep', 'src/app.py'] and "
        "open('src/app.py').read() == \"print('hi')\\n\"; sys.exit(0 if ok else 1)"
    )
    assert _run(tree, _check(inspector)).passed


def test_a_check_on_another_tree_sees_exactly_that_tree(tree: tuple[GitRepo, str]) -> None:
    repo, first = tree
    _run(tree, _check("pass"))
    git(repo.path, "rm", "-q", "src/app.py")
    (repo.path / "new.txt").write_text("new\n")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "next")
    second = git(repo.path, "rev-parse", "HEAD^{tree}").strip()
    inspector = (
        "import os, sys; files = sorted(os.path.join(d, f)[2:] for d, _, fs in os.walk('.') "
        "for f in fs); sys.exit(0 if files == ['build/keep', 'new.txt'] else 1)"
    )
    assert first != second
    assert _run((repo, second), _check(inspector)).passed


def test_a_check_tree_left_mid_move_by_a_killed_process_is_taken_back(
    tree: tuple[GitRepo, str],
) -> None:
    repo, _ = tree
    assert _run(tree, _check("pass")).passed
    [slot] = (repo.path / ".git/imm/trees").glob("slot-*")
    (slot / "index.lock").write_text("")  # what a SIGKILL during `read-tree -u` leaves
    (slot / "tree/src/app.py").write_text("half written")
    inspector = "import sys; sys.exit(open('src/app.py').read() != \"print('hi')\\n\")"
    assert _run(tree, _check(inspector)).passed
