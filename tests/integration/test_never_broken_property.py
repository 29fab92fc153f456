"""A property of `imm run` (SPEC §5.4, issue 28): for random DAGs of tasks whose changes break
random other tasks' checks, the final `imm/<slug>` passes the checks of every task it holds, and
every task not on it is parked or skipped with a reason. Real lanes, real executor processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, git, run_cli

# The executor: writes its task's file, and a file that breaks each task it is told to break.
EXECUTOR_CODE = """
import json, os, pathlib
task = os.environ["IMM_TASK_ID"]
breaks = json.loads(pathlib.Path(os.environ["IMM_TEST_DIR"], "breaks.json").read_text())
breaks = breaks.get(task, [])
pathlib.Path(task + ".txt").write_text(task + "\\n")
for victim in breaks:
    path = pathlib.Path("break", task, victim)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("broken\\n")
"""

# A task's check: its file is there, and no task has broken it — unless a file planted for it
# says otherwise. A hostile check (issue 42) first plants such a file for each task it is told
# to, as an untracked module a test imports would: were a sibling's check to see it, a break
# would pass. Run with the task alone (as on the final branch), it plants nothing.
CHECK_CODE = (
    "import glob, pathlib, sys, time; t = sys.argv[1]; plants = sys.argv[2:]; "
    "[time.sleep(0.3) for _ in plants[:1]]; "  # the longest: a worker pulls it first
    "[pathlib.Path('plant').mkdir(exist_ok=True) for _ in plants[:1]]; "
    "[pathlib.Path('plant', v).write_text('ok') for v in plants]; "
    "broken = glob.glob('break/*/' + t) and not pathlib.Path('plant', t).exists(); "
    "sys.exit(0 if pathlib.Path(t + '.txt').exists() and not broken else 1)"
)


Drawn = tuple[dict[str, list[str]], dict[str, list[str]], int, dict[str, list[str]]]


@st.composite
def initiatives(draw: st.DrawFn) -> Drawn:
    size = draw(st.integers(min_value=2, max_value=6))
    tasks = [f"t{index}" for index in range(size)]
    needs = {
        task: sorted(draw(st.sets(st.sampled_from(tasks[:index]), max_size=2)) if index else [])
        for index, task in enumerate(tasks)
    }
    breaks = {
        task: sorted(draw(st.sets(st.sampled_from([t for t in tasks if t != task]), max_size=2)))
        for task in tasks
    }
    lanes = draw(st.integers(min_value=1, max_value=3))
    plants = {
        task: sorted(draw(st.sets(st.sampled_from([t for t in tasks if t != task]), max_size=2)))
        for task in tasks
    }
    return needs, breaks, lanes, plants


def _check_passes(tree: Path, task: str) -> bool:
    done = subprocess.run([sys.executable, "-c", CHECK_CODE, task], cwd=tree, check=False)
    return done.returncode == 0


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=initiatives())
# always: a lane whose base holds the task it breaks, as its dependency or by the order lanes ran
@example(drawn=({"t0": [], "t1": ["t0"]}, {"t0": [], "t1": ["t0"]}, 2, {}))
@example(drawn=({"t0": [], "t1": []}, {"t0": [], "t1": ["t0"]}, 1, {}))
# always: every task's check plants for the task another breaks, in one stack (issue 42 #1)
@example(
    drawn=(
        {"t0": [], "t1": [], "t2": []},
        {"t0": ["t1"], "t1": [], "t2": []},
        3,
        {"t0": ["t1"], "t1": [], "t2": ["t1"]},
    )
)
def test_after_imm_run_the_branch_passes_every_check_of_every_task_it_holds(
    drawn: Drawn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    needs, breaks, lanes, plants = drawn
    # in the tests' folder, which the sandbox leaves writable (its /tmp is the command's own)
    with tempfile.TemporaryDirectory(dir=os.environ["IMM_SANDBOX_WRITABLE"]) as scratch:
        root = Path(scratch)
        (root / "breaks.json").write_text(json.dumps(breaks))
        (root / "executor.py").write_text(EXECUTOR_CODE)
        monkeypatch.setenv("IMM_TEST_DIR", str(root))
        repo = make_project(
            root / "r", needs,
            checks={task: descriptor(["-c", CHECK_CODE, task, *plants.get(task, [])])
                    for task in needs},
            scopes={task: [f"{task}.txt", f"break/{task}"] for task in needs},
            # one check at a time: a planting check and its victim share a worker's tree
            extra_files={".github/imm.yml": f"max_parallel: {lanes}\nverify_parallel: 1\n"},
        )  # fmt: skip
        executor = shlex.join([sys.executable, str(root / "executor.py")])
        code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", executor)
        assert code in (0, 1), err
        state = current(repo).state
        held = [child.task_id for child in state.children if child.state.done]
        tree = root / "final"
        git(repo, "worktree", "add", "-q", "--detach", str(tree), "imm/init")
        for task in held:
            assert _check_passes(tree, task), f"{task}'s check fails on imm/init ({drawn})"
        assert held, drawn  # the first lane verified alone passes: never a vacuous run
        for child in state.children:
            if not child.state.done:
                assert str(child.state) in ("needs_human", "skipped_blocked"), drawn
                assert child.reason, drawn
                # parked for what it broke (at integration, or in its lane, on a base that
                # broke it), or skipped for a parked dependency: nothing else
                assert child.reason.startswith(
                    ("batch_integration_check_failed: ", "QA failure limit", "dependency ")
                ), (child.reason, drawn)
        assert (state.batch_state == "completed") == (len(held) == len(state.children))
