"""Speculative lanes (issue 61, ADR 0072): with `imm run`, a lane whose dependency's lane has
committed but not landed starts on a base holding that commit's change, lands after it through
the same guards, and is set back when the dependency is parked. Real git, real lanes; a's check
is slow at integration (its lane has committed long before it lands)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, git, run_cli

# b's executor says whether a's file is in its tree, then does its own work
EXECUTOR = (
    'if [ "$IMM_TASK_ID" = b ]; then\n'
    '  if [ -f a.txt ]; then echo yes > "$SEEN/b-saw-a"; else echo no > "$SEEN/b-saw-a"; fi\n'
    "fi\n"
    'echo "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"\n'
)


CHECK = """\
import pathlib, sys, time
counter, fails = sys.argv[1], sys.argv[2] == "fails"
runs = pathlib.Path(counter)
n = int(runs.read_text() or 0) if runs.exists() else 0
runs.write_text(str(n + 1))
time.sleep(1.5 if n else 0)
sys.exit(1 if n and fails else 0 if pathlib.Path("a.txt").exists() else 1)
"""


def _slow_check(counter: Path, *, fails_after_first: bool) -> str:
    """a's check: its first run (in a's lane) passes; each later one (integration) takes a
    second and a half, and fails when `fails_after_first`."""
    return descriptor(["check_a.py", str(counter), "fails" if fails_after_first else "passes"])


def _run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    open_dir: Path,
    *,
    fails: bool,
    speculate: bool = True,
    executor_code: str = EXECUTOR,
) -> tuple[Path, int, str, str]:
    counter = open_dir / "a-runs"
    config = "" if speculate else "speculative_lanes: false\n"
    repo = make_project(
        tmp_path / "r", {"a": [], "b": ["a"]},
        checks={"a": _slow_check(counter, fails_after_first=fails)},
        extra_files={".github/imm.yml": config, "check_a.py": CHECK},
    )  # fmt: skip
    script = tmp_path / "executor.sh"
    script.write_text(executor_code)
    executor = f"env SEEN={shlex.quote(str(open_dir))} sh {shlex.quote(str(script))}"
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    return repo, code, out, err


def test_a_dependent_lane_starts_on_its_dependencys_commit_before_it_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path
) -> None:
    repo, code, _, err = _run(tmp_path, capsys, open_dir, fails=False)
    assert code == 0, err
    children = {child.task_id: child for child in current(repo).state.children}
    assert {task: str(child.state) for task, child in children.items()} == {
        "a": "integrated", "b": "integrated"
    }  # fmt: skip
    lane = children["b"].lane
    assert lane is not None
    assert lane.speculative_on == ["a"]
    # its base held a's change, though a had not landed when it started
    assert (open_dir / "b-saw-a").read_text().strip() == "yes"
    assert err.index("lane b started") < err.index("integrated a as")
    # a lane job fetches its base by id: the batch's refs keep it reachable
    holders = git(repo, "for-each-ref", "--contains", lane.base_head, "refs/imm/")
    assert holders.strip(), "the speculative base is reachable from no ref"


def test_without_speculative_lanes_a_dependent_waits_for_its_dependency_to_land(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path
) -> None:
    repo, code, _, err = _run(tmp_path, capsys, open_dir, fails=False, speculate=False)
    assert code == 0, err
    lane = {child.task_id: child for child in current(repo).state.children}["b"].lane
    assert lane is not None
    assert lane.speculative_on is None
    assert err.index("integrated a as") < err.index("lane b started")


def test_a_speculative_lane_is_set_back_when_its_dependency_is_parked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path
) -> None:
    repo, code, _, err = _run(tmp_path, capsys, open_dir, fails=True)
    assert code == 1, err
    children = {child.task_id: child for child in current(repo).state.children}
    assert str(children["a"].state) == "needs_human"
    # b started on a's commit, then went back: it waits for a, as a pending task would
    assert (open_dir / "b-saw-a").exists()
    assert "b: set back, to start again once its dependencies land" in err
    assert str(children["b"].state) in ("pending", "skipped_blocked")
    assert children["b"].commit is None
    assert json.dumps(children["b"].lane) == "null"


def test_a_speculative_lane_that_failed_on_its_base_is_set_back_when_its_dependency_is_parked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path
) -> None:
    # b's agent fails on a base holding a's change, which never lands: b's failure is not
    # its own task's (found by test_never_broken_property: a lane deleting a test an
    # unlanded dependency had deleted already)
    failing = EXECUTOR + 'if [ "$IMM_TASK_ID" = b ]; then exit 1; fi\n'
    repo, code, _, err = _run(tmp_path, capsys, open_dir, fails=True, executor_code=failing)
    assert code == 1, err
    children = {child.task_id: child for child in current(repo).state.children}
    assert str(children["a"].state) == "needs_human"
    assert (open_dir / "b-saw-a").read_text().strip() == "yes"
    assert str(children["b"].state) == "skipped_blocked", children["b"].reason
    assert (children["b"].reason or "").startswith("dependency "), children["b"].reason


PIPELINE_CHECK = """\
import pathlib, sys, time
runs = pathlib.Path(sys.argv[1])
n = int(runs.read_text() or 0) if runs.exists() else 0
runs.write_text(str(n + 1))
if n and not pathlib.Path("b.txt").exists():
    time.sleep(6)  # integration, on a stack without b: long
sys.exit(0 if pathlib.Path("a.txt").exists() else 1)
"""


def test_lanes_ready_while_a_stack_is_verified_are_verified_on_its_top_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path
) -> None:
    """Issue 61: two stacks verified at once. a's stack (a alone) takes six seconds to verify;
    b ends meanwhile. Its stack — a and b, on a's candidate — is verified beside it and lands
    both before a's own stack is done."""
    repo = make_project(
        tmp_path / "r", {"a": [], "b": []},
        checks={"a": descriptor(["check_a.py", str(open_dir / "a-runs")])},
        extra_files={"check_a.py": PIPELINE_CHECK},
    )  # fmt: skip
    script = tmp_path / "executor.sh"
    script.write_text(
        '[ "$IMM_TASK_ID" = b ] && sleep 2\necho "$IMM_TASK_ID" > "$IMM_TASK_ID.txt"\n'
    )
    executor = f"sh {shlex.quote(str(script))}"
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
    assert code == 0, err
    assert "verified 2 lanes as one stack (a, b)" in err
    assert "verified 1 lane as one stack (a)" not in err
