"""What the agents cost (issue 45): each task's and the batch's cost where people look, a
budget that stops admission in time, and QA attempts that resume the agent's session. The
executor is docs/github.md's Claude Code recipe, word for word, with the stand-in `claude`
(tests/stand_ins/claude) that ends with the real result object."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from imm_action.github.reporting import status_comment
from imm_action.model.report import BatchRunReport
from imm_action.model.spend import AgentRun
from imm_action.model.state import BatchState, ChildState
from tests.batch_helpers import current, file_check, make_project, run_pass, work
from tests.conftest import as_github_step, run_cli
from tests.integration.test_claude_recipe import STAND_INS, readme_recipe

TEN = {task: [] for task in "abcdefghij"}
# the stand-in's price: 10 cents and a cent per letter past `a` of the task id
COST = {task: round(0.10 + 0.01 * index, 2) for index, task in enumerate("abcdefghij")}


def _config(**more: object) -> str:
    text = io.StringIO()
    YAML().dump({"executor": readme_recipe()["executor"], **more}, text)
    return text.getvalue()


@pytest.fixture(autouse=True)
def _claude_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", f"{STAND_INS}{os.pathsep}{os.environ['PATH']}")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def test_a_ten_task_batch_shows_each_tasks_cost_and_the_total_in_status_json_comment_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = {key: value for key, value in readme_recipe().items() if key != "lane_setup"}
    assert recipe["max_cost_usd"] == 25  # the recipe as docs/github.md shows it, but its download
    text = io.StringIO()
    YAML().dump(recipe, text)
    repo = make_project(tmp_path / "r", TEN, extra_files={".github/imm.yml": text.getvalue()})
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo))
    assert code == 0, err
    assert "; $23.55 left of max_cost_usd $25.00" in out
    # 5,420 tokens a run and a quarter of the prompt's characters
    found = re.search(r"agents: 10 tasks, \$1\.45, 5\d k tokens; the costliest: j \$0\.19 over "
                      r"1 attempt", out)  # fmt: skip
    assert found is not None, out  # imm run's closing report
    line = found.group(0)
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    assert line in out
    assert [row.split()[2] for row in out.splitlines() if row.startswith("  ")][:10] == [
        f"${COST[task]:.2f}" for task in "abcdefghij"
    ]
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo), "--format", "json")
    report = BatchRunReport.model_validate_json(out)
    assert report.spend is not None
    assert report.spend.cost_usd == pytest.approx(1.45)
    assert (report.spend.runs, report.spend.unknown, report.spend.turns) == (10, 0, 60)
    assert {c.task_id: c.spend.cost_usd for c in report.children if c.spend} == pytest.approx(COST)
    stored = current(repo)
    comment = status_comment(report, stored.state, "https://github.com/o/r")
    assert f"**Cost:** {line}" in comment
    assert "| task | state | lane | reason | commit | cost |" in comment
    assert '["j<br/>$0.19"]' in comment  # the Mermaid graph: cost per node
    summary = as_github_step(monkeypatch, tmp_path)
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo))  # the integrate job
    assert code == 0, err
    assert f"**Cost:** {line}" in summary.read_text()


def test_a_qa_attempt_gets_the_agents_session_and_the_recipe_resumes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in writes `a (resumed)` only in a resumed session; the check wants it, so the
    first attempt fails and the second passes only by `--resume`. A session id in imm's own
    environment never reaches the first attempt (the stand-in would fail: no such session)."""
    monkeypatch.setenv("IMM_AGENT_SESSION", "stale-session-of-another-lane")
    repo = make_project(
        tmp_path / "r", {"a": []}, checks={"a": file_check("a.txt", "(resumed)")},
        extra_files={".github/imm.yml": _config(qa_failure_limit=2)},
    )  # fmt: skip
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo))
    assert code == 0, out + err
    (child,) = current(repo).state.children
    assert child.state is ChildState.INTEGRATED
    assert child.qa_failures == 1
    assert child.spend is not None
    assert (child.spend.runs, child.spend.attempts) == (2, 1)
    assert child.spend.cost_usd == pytest.approx(0.10 + 0.10 / 3, abs=1e-6)
    assert "the costliest" not in out  # one task: nothing to compare


def test_max_cost_usd_stops_admission_at_the_budget_and_the_lanes_in_flight_land(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two lanes at once; a and b cost $0.21 together, past the $0.15 budget: both land, no
    third lane starts, and the batch stops saying what it spent. A continuation with a larger
    budget counts what was spent and runs the rest."""
    repo = make_project(
        tmp_path / "r", {"a": [], "b": [], "c": [], "d": []},
        extra_files={".github/imm.yml": _config(max_parallel=2, max_cost_usd=0.15)},
    )  # fmt: skip
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo))
    assert code == 1, out + err
    state = current(repo).state
    assert state.batch_state is BatchState.BUDGET_STOPPED
    assert [c.state for c in state.children] == [ChildState.INTEGRATED] * 2 + [
        ChildState.PENDING
    ] * 2
    assert "the cost budget is used: $0.21 spent of max_cost_usd $0.15; 2 tasks wait" in out
    assert "imm run --max-cost-usd" in out
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--max-cost-usd", "0.60")
    assert code == 0, out + err
    state = current(repo).state
    assert state.batch_state is BatchState.COMPLETED
    assert state.spent_before is not None
    assert state.spent_before.cost_usd == pytest.approx(0.21)
    assert "$0.21 before, in the batches it continues; $0.14 left of max_cost_usd $0.60" in out


def test_the_github_shaped_passes_stop_admitting_once_the_outcomes_spend_reaches_the_budget(
    tmp_path: Path,
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": [], "b": [], "c": []},
        extra_files={".github/imm.yml": "max_parallel: 1\nmax_cost_usd: 1\n"},
    )  # fmt: skip
    run_pass(repo)
    work(repo, "a", agent_runs=[AgentRun(cost_usd=0.6), AgentRun(cost_usd=0.5)])
    result = run_pass(repo)
    state = result.stored.state
    assert [c.state for c in state.children] == [
        ChildState.INTEGRATED, ChildState.PENDING, ChildState.PENDING
    ]  # fmt: skip
    assert result.admitted == ()
    assert state.batch_state is BatchState.BUDGET_STOPPED
    assert state.children[0].spend is not None
    assert state.children[0].spend.cost_usd == pytest.approx(1.1)


def test_a_malformed_or_huge_report_never_fails_a_lane_and_its_cost_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        "import os, sys\n"
        "open(os.environ['IMM_TASK_ID'] + '.txt', 'w').write(os.environ['IMM_TASK_ID'] + '\\n')\n"
        "sys.stdout.write('{\"total_cost_usd\": ' + 'x' * (3 << 20) + '\\n')\n"  # 3 MiB, broken
        'sys.stdout.write(\'{"total_cost_usd": "free", "num_turns": -1}\\n\')\n'
        "sys.stdout.write('{' * 200000)\n"  # no newline at the end
    )
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    code, out, err = run_cli(
        capsys, "run", "init", "--repo", str(repo), "--executor", f"python3 {script}"
    )
    assert code == 0, out + err
    state = current(repo).state
    assert [c.state for c in state.children] == [ChildState.INTEGRATED] * 2
    assert all(c.spend is not None and (c.spend.runs, c.spend.unknown) == (1, 1)
               for c in state.children)  # fmt: skip
    assert "agents:" not in out  # no run reported: no view shows a cost
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo), "--format", "json")
    report = BatchRunReport.model_validate_json(out)
    assert report.spend is not None
    assert (report.spend.runs, report.spend.unknown, report.spend.cost_usd) == (2, 2, 0.0)


def test_the_recipes_stand_in_ends_with_the_real_result_object_in_both_json_forms(
    tmp_path: Path,
) -> None:
    import subprocess

    prompt = "# Task b\n\n## Scope\n\n- `b.txt`\n\n## Acceptance\n"
    for form in ("json", "stream-json"):
        done = subprocess.run(
            [str(STAND_INS / "claude"), "-p", "--output-format", form], cwd=tmp_path,
            input=prompt, capture_output=True, text=True, check=True,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
        result = json.loads(done.stdout.splitlines()[-1])
        assert {"total_cost_usd", "usage", "num_turns", "duration_ms", "duration_api_ms",
                "session_id", "is_error", "subtype"} <= set(result)  # fmt: skip
        assert result["total_cost_usd"] == pytest.approx(0.11)


def test_the_report_is_read_from_standard_output_alone_and_whole_past_the_logs_line_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The result object holds the agent's last message: 100 KiB here, past the 4 KiB the log
    keeps of a line. A JSON line the agent (or a tool it ran) prints on standard error is not
    its report."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, os, sys\n"
        "task = os.environ['IMM_TASK_ID']\n"
        "open(task + '.txt', 'w').write(task + '\\n')\n"
        "print(json.dumps({'type': 'result', 'total_cost_usd': 0.42, 'num_turns': 3,\n"
        "                  'result': 'x' * 100_000, 'session_id': 's-1'}), flush=True)\n"
        "print(json.dumps({'type': 'result', 'total_cost_usd': 99.0}), file=sys.stderr)\n"
    )
    repo = make_project(tmp_path / "r", {"a": []})
    code, out, err = run_cli(
        capsys, "run", "init", "--repo", str(repo), "--executor", f"python3 {script}"
    )
    assert code == 0, out + err
    (child,) = current(repo).state.children
    assert child.spend is not None
    assert (child.spend.cost_usd, child.spend.turns) == (0.42, 3)


# `a` reports $5 on its first attempt and fails its check, then works 4 s more on its second;
# `b` ends after 2 s, when `a`'s spend is known only to the lane at work; `c` waits for a slot.
SPENDING = shlex.join([sys.executable, "-c", (
    "import json, os, pathlib, time; t = os.environ['IMM_TASK_ID']\n"
    "first = os.environ['IMM_ATTEMPT'] == '1'\n"
    "if t == 'a' and not first:\n    time.sleep(4)\n"
    "if t == 'b':\n    time.sleep(2)\n"
    "pathlib.Path(t + '.txt').write_text('wrong' if t == 'a' and first else t)\n"
    "cost = 5.0 if t == 'a' and first else 0.0\n"
    "print(json.dumps({'type': 'result', 'subtype': 'success', 'total_cost_usd': cost}))"
)])  # fmt: skip


def test_imm_run_counts_what_the_lanes_at_work_spent_before_it_starts_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 62 #7: `a`'s $5, spent by a lane still at work, is over the $1 budget when `b`'s
    slot frees: `c` never starts (counted only once `a`'s outcome is taken, `c` would have)."""
    config = "max_parallel: 2\nmax_cost_usd: 1\n"
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": []},
                        extra_files={".github/imm.yml": config})  # fmt: skip
    _, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", SPENDING)
    children = {child.task_id: child for child in current(repo).state.children}
    assert children["a"].spend is not None
    assert children["a"].spend.cost_usd == 5.0, out + err  # its first attempt's, then $0
    assert children["c"].state == ChildState.PENDING, out + err
    assert children["c"].lane is None
    assert current(repo).state.batch_state == BatchState.BUDGET_STOPPED
