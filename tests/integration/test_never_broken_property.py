"""A property of `imm run` (SPEC §5.4, issues 28 and 58): for random DAGs of tasks whose changes
break random other tasks' tests, and may silence the broken test as an agent does — delete it,
skip it, deselect it — the final `imm/<slug>` passes the tests of every task it holds, as the
base wrote them, and every task not on it is parked or skipped with a reason. Real lanes, real
executor processes; each task's check reports its tests in TAP."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor, git, run_cli

# The executor: writes its task's file, and a file that breaks each task it is told to break;
# then silences each broken test as it is told: deletes it, marks it skipped, deselects it.
EXECUTOR_CODE = """
import json, os, pathlib
task = os.environ["IMM_TASK_ID"]
here = pathlib.Path(os.environ["IMM_TEST_DIR"])
breaks = json.loads((here / "breaks.json").read_text()).get(task, [])
silence = json.loads((here / "silence.json").read_text()).get(task, "none")
pathlib.Path(task + ".txt").write_text(task + "\\n")
for victim in breaks:
    path = pathlib.Path("break", task, victim)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("broken\\n")
    if silence == "delete":
        pathlib.Path("tests", victim, "good").unlink()
    elif silence in ("skip", "deselect"):
        mark = pathlib.Path(silence, victim)
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text("good\\n")
"""

# A task's check (check.py in the repository): its file is there, and each of its tests
# passes — `good` fails once a task has broken it, `other` never does — reported in TAP, less
# what `skip/<task>` skips and `deselect/<task>` leaves out. `--suite`, the repository's own
# suite (a branch check): every task's tests alike, whether its task ran yet or not. A hostile
# check (issue 42) first plants a file for each task it is told to, as an untracked module a
# test imports would: were a sibling's check to see it, a break would pass. Run with the task
# alone (as on the final branch), it plants nothing.
CHECK_PY = """
import glob, pathlib, sys, time
task, plants = sys.argv[1], sys.argv[2:]
if plants:
    time.sleep(0.3)  # the longest: a worker pulls it first
    pathlib.Path("plant").mkdir(exist_ok=True)
    for victim in plants:
        pathlib.Path("plant", victim).write_text("ok")
def marked(kind, owner):
    path = pathlib.Path(kind, owner)
    return set(path.read_text().split()) if path.exists() else set()
owners = sorted(p.name for p in pathlib.Path("tests").iterdir()) if task == "--suite" else [task]
failed = task != "--suite" and not pathlib.Path(task + ".txt").exists()
print("TAP version 13")
number = 0
for owner in owners:
    broken = glob.glob("break/*/" + owner) and not pathlib.Path("plant", owner).exists()
    skipped, deselected = marked("skip", owner), marked("deselect", owner)
    for name in sorted(p.name for p in pathlib.Path("tests", owner).iterdir()):
        if name in deselected:
            continue
        number += 1
        if name in skipped:
            print(f"ok {number} - {owner}/{name} # SKIP")
        elif name == "good" and broken:
            failed = True
            print(f"not ok {number} - {owner}/{name}")
        else:
            print(f"ok {number} - {owner}/{name}")
print(f"1..{number}")
sys.exit(1 if failed else 0)
"""

SILENCE = ["none", "delete", "skip", "deselect"]
Drawn = tuple[dict[str, list[str]], dict[str, list[str]], int, dict[str, list[str]], dict[str, str]]


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
    silence = {task: draw(st.sampled_from(SILENCE)) for task in tasks if breaks[task]}
    return needs, breaks, lanes, plants, silence


def _check_passes(tree: Path, task: str) -> bool:
    """The task's tests as the base wrote them, on the branch's code: its file, and no break."""
    broken = list(tree.glob(f"break/*/{task}"))
    return (tree / f"{task}.txt").exists() and not broken


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=initiatives())
# always: a lane whose base holds the task it breaks, as its dependency or by the order lanes ran
@example(drawn=({"t0": [], "t1": ["t0"]}, {"t0": [], "t1": ["t0"]}, 2, {}, {}))
@example(drawn=({"t0": [], "t1": []}, {"t0": [], "t1": ["t0"]}, 1, {}, {}))
# always: a lane that breaks a landed task's test and deletes it (issue 58; skipping and
# deselecting are drawn, and each is held in test_judged_by_tests.py)
@example(drawn=({"t0": [], "t1": ["t0"]}, {"t0": [], "t1": ["t0"]}, 2, {}, {"t1": "delete"}))
# always: every task's check plants for the task another breaks, in one stack (issue 42 #1)
@example(
    drawn=(
        {"t0": [], "t1": [], "t2": []},
        {"t0": ["t1"], "t1": [], "t2": []},
        3,
        {"t0": ["t1"], "t1": [], "t2": ["t1"]},
        {"t0": "none"},
    )
)
def test_after_imm_run_the_branch_passes_every_check_of_every_task_it_holds(
    drawn: Drawn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    needs, breaks, lanes, plants, silence = drawn
    # in the tests' folder, which the sandbox leaves writable (its /tmp is the command's own)
    with tempfile.TemporaryDirectory(dir=os.environ["IMM_SANDBOX_WRITABLE"]) as scratch:
        root = Path(scratch)
        (root / "breaks.json").write_text(json.dumps(breaks))
        (root / "silence.json").write_text(json.dumps(silence))
        (root / "executor.py").write_text(EXECUTOR_CODE)
        monkeypatch.setenv("IMM_TEST_DIR", str(root))
        # each task's tests, `good` and `other`; a lane may touch those of the tasks it breaks.
        # A lane that silences what it breaks meets the suite (branch checks): a task's own
        # check guards its tests only once it has landed, the suite guards them all
        tests = {f"tests/{task}/{name}": "" for task in needs for name in ("good", "other")}
        silencing = any(mode != "none" for mode in silence.values())
        suite = 'branch_checks: ["python3 check.py --suite"]\n' if silencing else ""
        repo = make_project(
            root / "r", needs,
            checks={task: descriptor(["check.py", task, *plants.get(task, [])])
                    for task in needs},
            scopes={task: [f"{task}.txt", f"break/{task}",
                           *(f"{kind}/{victim}" for victim in breaks[task]
                             for kind in ("skip", "deselect")),
                           *(f"tests/{victim}/good" for victim in breaks[task])]
                    for task in needs},
            # one check at a time: a planting check and its victim share a worker's tree
            extra_files={".github/imm.yml": f"max_parallel: {lanes}\nverify_parallel: 1\n{suite}",
                         "check.py": CHECK_PY, **tests},
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
        if silencing:  # the suite as the base wrote it: every task's tests pass
            assert not list(tree.glob("break/*/*")), drawn
        # the first lane verified alone passes — never a vacuous run — unless the suite finds
        # it breaks a task (that one is parked, below)
        assert held or silencing, drawn
        for child in state.children:
            if not child.state.done:
                assert str(child.state) in ("needs_human", "skipped_blocked"), drawn
                assert child.reason, drawn
                # parked for what it broke or silenced (at integration, or in its lane, on a
                # base that broke it), or skipped for a parked dependency: nothing else
                assert child.reason.startswith(
                    ("batch_integration_check_failed: ", "QA failure limit", "dependency ")
                ), (child.reason, drawn)
        assert (state.batch_state == "completed") == (len(held) == len(state.children))
