"""The repository's own checks on every move (issue 44, ADR 0061): `branch_checks` gate every
move of `imm/<slug>`, owned by no task; a red base stops the batch before any lane; with
`held_checks: branch` the tasks' checks gate only their own lanes' moves. Real git, real
lanes (`imm run`) and the GitHub-shaped passes (`imm reconcile`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imm_action.render import job_summary
from tests.batch_helpers import current, file_check, make_project, run_pass, work
from tests.conftest import descriptor, git, run_cli
from tests.integration.test_local_run import EXECUTOR

# the repository's own "suite": config.txt must not say broken — no task's check asks it
SUITE = "python3 -c \"import sys; sys.exit('broken' in open('config.txt').read())\""


def _config(branch: str = SUITE, held: str | None = None) -> str:
    lines = [f"branch_checks:\n  - name: suite\n    command: {json.dumps(branch)}"]
    if held is not None:
        lines.append(f"held_checks: {held}")
    return "\n".join(lines) + "\n"


def _project(tmp_path: Path, config: str, **kw: object) -> Path:
    return make_project(
        tmp_path / "r", {"a": [], "b": []},
        scopes={"a": ["a.txt"], "b": ["b.txt", "config.txt"]},
        extra_files={"config.txt": "mode=ok\n", ".github/imm.yml": config}, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _imm_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], repo: Path, behaviours: dict[str, str]
) -> tuple[int, str]:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps(behaviours))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    return code, out + err


def _states(repo: Path) -> dict[str, tuple[str, str]]:
    return {c.task_id: (str(c.state), c.reason or "") for c in current(repo).state.children}


def test_a_lane_breaking_what_no_task_checks_is_parked_naming_the_branch_check(
    tmp_path: Path,
) -> None:
    """Through the GitHub-shaped passes: `b`'s own check passes, but its change breaks the
    repository's suite, which every move must pass."""
    repo = _project(tmp_path, _config())
    run_pass(repo)
    work(repo, "a")
    work(repo, "b", {"b.txt": "b\n", "config.txt": "mode=broken\n"})
    for _ in range(3):
        run_pass(repo)
        if current(repo).state.batch_state != "running":
            break
    states = _states(repo)
    assert states["a"][0] == "integrated", states
    assert states["b"][0] == "needs_human", states
    assert "branch:suite" in states["b"][1], states
    assert "broken" not in git(repo, "show", "imm/init:config.txt")
    # the job summary and the status comment name the branch check and its last verdict
    stored = current(repo)
    assert stored.report is not None
    head = git(repo, "rev-parse", "imm/init").strip()
    line = f"branch check branch:suite: passed on imm/init at {head[:12]}"
    assert line in job_summary(stored.report, stored.state, "https://github.com/o/r")


def test_through_imm_run_the_lane_breaking_the_suite_is_parked_and_the_other_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # b's lane writes "b" into config.txt, which its own check asks for and the suite refuses
    suite = "python3 -c \"import sys; sys.exit(open('config.txt').read().strip() == 'b')\""
    repo = _project(tmp_path, _config(suite), checks={"b": file_check("config.txt", "b")})
    behaviours = {"b": "ok", "b.file": "config.txt"}
    code, said = _imm_run(tmp_path, capsys, repo, behaviours)
    assert code == 1, said
    states = _states(repo)
    assert states["a"][0] == "integrated", states
    assert states["b"][0] == "needs_human", states
    assert "branch:suite" in states["b"][1], states


def test_without_branch_checks_the_same_break_lands(tmp_path: Path) -> None:
    """The shape above without the key: what no task checks lands (why the key exists)."""
    repo = _project(tmp_path, "max_parallel: 2\n")
    run_pass(repo)
    work(repo, "a")
    work(repo, "b", {"b.txt": "b\n", "config.txt": "mode=broken\n"})
    run_pass(repo)
    assert {state for state, _ in _states(repo).values()} == {"integrated"}


def test_a_red_base_stops_the_batch_before_any_lane_naming_the_check_and_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = "python3 -c \"import sys; print('3 tests failed'); sys.exit(1)\""
    repo = _project(tmp_path, _config(failing))
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 1, said
    state = current(repo).state
    assert state.batch_state == "needs_human"
    assert (state.stop_reason or "").startswith("batch_base_check_failed: branch:suite failed")
    assert "3 tests failed" in said  # its output
    assert "no lane ran" in said  # what to do
    # what differs from the user's own run, and how to provide it (issue 59 #6)
    assert "a home of their own" in " ".join(said.split())
    assert "`check_setup` prepares what they need" in " ".join(said.split())
    assert "branch check branch:suite: FAILED on imm/init at " in said
    assert all(child.lane is None for child in state.children)  # no agent ran
    assert git(repo, "for-each-ref", "refs/heads/imm-lane").strip() == ""


# unittest's way: the error, then a rule, the count and the verdict, none of which says what
UNITTEST_TAIL = "print('FAIL: test_total (tests.test_cart.T)'); print('AssertionError: 3 != 4'); "
UNITTEST_TAIL += "print(); print('-' * 70); print('Ran 9 tests in 0.004s'); print(); "
UNITTEST_TAIL += "print('FAILED (failures=1)'); sys.exit(1)"


def test_a_red_bases_failure_is_shown_with_its_output_where_a_tasks_would_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reason holds a few last lines; `imm status`, its markdown (the status comment, the
    job summary) show the failed check's output as they show a task's failed check."""
    repo = _project(tmp_path, _config(f'python3 -c "import sys; {UNITTEST_TAIL}"'))
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 1, said
    assert "| AssertionError: 3 != 4" in said
    reason = current(repo).state.stop_reason or ""
    # its few last lines that say something (not the rule of dashes)
    said_last = "AssertionError: 3 != 4 | Ran 9 tests in 0.004s | FAILED (failures=1))"
    assert reason.endswith(f"(branch:suite exited with 1: {said_last}"), reason
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert "branch:suite: `python3 -c " in out
    assert "| AssertionError: 3 != 4" in out
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo), "--format", "markdown")
    assert "<code>imm/init</code> · branch:suite: <code>python3 -c " in out
    assert "AssertionError: 3 != 4" in out


def test_a_red_base_printing_long_lines_still_stops_the_batch_before_any_lane(
    tmp_path: Path,
) -> None:
    """The reason holds the last lines of the check's output; long ones once pushed its start,
    `batch_base_check_failed`, out of its bounds, and the batch went on to admit lanes."""
    long_lines = "python3 -c \"import sys; print(('x' * 900 + chr(10)) * 3); sys.exit(1)\""
    repo = _project(tmp_path, _config(long_lines))
    run_pass(repo)
    state = current(repo).state
    assert state.batch_state == "needs_human"
    assert (state.stop_reason or "").startswith("batch_base_check_failed: branch:suite failed")
    assert (state.stop_reason or "").endswith("…)")
    assert len((state.stop_reason or "").encode()) <= 1500
    assert all(child.lane is None for child in state.children)  # no lane admitted


def test_a_red_base_says_how_its_check_ended_when_its_exit_status_was_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check that exits 0 but prints past its output limit failed: the reason says so, in
    the words every failed command gets, never "exited with 0"."""
    config = (
        "branch_checks:\n  - name: suite\n    command:\n      executable: python3\n"
        "      argv: ['-c', 'print(\"x\" * 5000)']\n      max_output_bytes: 100\n"
    )
    repo = _project(tmp_path, config)
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 1, said
    reason = current(repo).state.stop_reason or ""
    assert "branch:suite was stopped: its output passed its limit" in reason, reason
    assert "exited with 0" not in said
    assert "failed on the base (was stopped: its output passed its limit)" in said


def test_a_green_base_lets_the_batch_run_and_every_move_passes_the_branch_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, _config())
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 0, said
    assert {state for state, _ in _states(repo).values()} == {"integrated"}
    # the report says what gated the moves
    assert "(held_checks: all, with the branch checks)" in said
    assert "branch check branch:suite: passed on imm/init at " in said


def _counting_check(counter: Path, task: str) -> str:
    code = (
        f"import pathlib; p = pathlib.Path({str(counter)!r}); "
        f"p.write_text(p.read_text() + '{task} ' if p.exists() else '{task} ')"
    )
    return descriptor(["-c", code])


@pytest.mark.parametrize(("held", "a_runs"), [("all", 3), ("branch", 2)])
def test_held_checks_branch_leaves_a_tasks_check_to_its_own_lanes_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_dir: Path, held: str, a_runs: int
) -> None:
    """`a` lands first (its lane and its move: 2 runs of its check); `b`'s move then runs
    `a`'s check again only under `held_checks: all`."""
    counter = open_dir / f"runs-{held}"
    repo = make_project(
        tmp_path / "r", {"a": [], "b": ["a"]},
        checks={"a": _counting_check(counter, "a")},
        extra_files={"config.txt": "mode=ok\n", ".github/imm.yml": _config(held=held)},
    )  # fmt: skip
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 0, said
    assert counter.read_text().split().count("a") == a_runs, counter.read_text()
    assert f"(held_checks: {held}" in said


def test_after_a_red_base_is_fixed_running_again_verifies_the_moved_base_and_the_batch_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the red base's report says to do works: fix the base, commit, run again — the
    continuation starts from the fixed base, verifies it anew, and its lanes run."""
    suite = "python3 -c \"import sys; sys.exit('red' in open('config.txt').read())\""
    repo = _project(tmp_path, _config(suite))
    (repo / "config.txt").write_text("mode=red\n")
    git(repo, "commit", "-qam", "the suite fails here")
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 1, said
    assert "batch_base_check_failed" in said
    (repo / "config.txt").write_text("mode=ok\n")
    git(repo, "commit", "-qam", "fix the suite")
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 0, said
    assert {state for state, _ in _states(repo).values()} == {"integrated"}
    assert "branch check branch:suite: passed on imm/init at " in said


def test_the_plan_says_what_gates_every_move_before_a_batch_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`imm plan --format markdown` (and `/imm plan`'s reply) names the branch checks and what
    `held_checks` leaves to them: what a reviewer decides on before `/imm run`."""
    repo = _project(tmp_path, _config(held="branch"))
    code, out, _ = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "markdown")
    assert code == 0
    assert "## What gates every move of `imm/init`" in out
    assert f"- `branch:suite`: `{SUITE}`" in out
    assert "held_checks: branch — each task's checks gate its own lane's move" in out


def test_one_command_line_written_alone_is_a_list_of_one_branch_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 62 #2: `branch_checks: python -m pytest -q`, as formats.md's "a command line, or
    a mapping" reads, was refused with `Input should be a valid list`."""
    repo = _project(tmp_path, f"branch_checks: {json.dumps(SUITE)}\n")
    code, out, err = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "markdown")
    assert code == 0, err
    assert f"- `branch:1`: `{SUITE}`" in out


def test_a_batch_without_branch_checks_says_so_in_its_plan_its_report_and_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 62 #1: nothing said a batch was gated by its tasks' own checks alone — and a
    lane breaking a test no task names then landed."""
    from imm_action.github.reporting import status_comment

    said = "no branch checks: only the tasks' own checks gate a move"
    repo = _project(tmp_path, "max_parallel: 2\n")
    code, out, _ = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "markdown")
    assert code == 0
    assert said in out
    code, out = _imm_run(tmp_path, capsys, repo, {})
    assert code == 0, out
    assert said in out  # imm run's closing report
    stored = current(repo)
    assert stored.report is not None
    assert said in status_comment(stored.report, stored.state, "https://github.com/o/r")


def test_imm_check_proposes_the_suite_it_finds_where_the_config_sets_no_branch_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 62 #1: a config written before `imm init` set them says nothing of them."""
    repo = _project(tmp_path, "max_parallel: 2\n", checks=None)
    (repo / "pytest.ini").write_text("[pytest]\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pytest's config")
    code, out, _ = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 0
    assert (
        ".github/imm.yml:1: warning: no branch checks: only the tasks' own checks gate a move"
    ) in out
    assert "the suite found here: branch_checks: [python3 -m pytest -q] with held_checks: " in out
    (repo / ".github/imm.yml").write_text(_config())
    git(repo, "commit", "-qam", "the suite gates")
    code, out, _ = run_cli(capsys, "check", "--repo", str(repo))
    assert "no branch checks" not in out


def test_a_pass_gives_the_workflow_the_batchs_counts_and_the_head_its_branch_checks_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 62: the action's outputs a workflow can use — integrated, parked and waiting,
    cost and tokens where known, and the head that passed the branch checks."""
    from tests.conftest import as_github_step, step_outputs

    repo = _project(tmp_path, _config())
    run_pass(repo)
    work(repo, "a")
    work(repo, "b", {"b.txt": "b\n", "config.txt": "mode=broken\n"})
    as_github_step(monkeypatch, tmp_path)
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo))
    assert code == 1, err  # b parked
    outputs = step_outputs(tmp_path / "outputs")
    head = git(repo, "rev-parse", "imm/init").strip()
    assert {name: outputs[name] for name in ("integrated", "parked", "waiting")} == {
        "integrated": "1", "parked": "1", "waiting": "0"}  # fmt: skip
    assert outputs["green-head"] == head
    assert (outputs["cost-usd"], outputs["tokens"]) == ("", "")  # no agent said


def test_each_move_counts_the_branch_checks_among_what_passed_on_the_head_it_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 62 #7: the branch checks reach a move two ways — the head level's checks run
    them, and each candidate's own checks are joined with them. This holds the second: without
    it the report counted the last lane's check alone as passed on the head."""
    repo = _project(tmp_path, _config(held="branch"))
    code, said = _imm_run(tmp_path, capsys, repo, {})
    assert code == 0, said
    assert "every check of them (2 checks) passed on its head" in said
    assert current(repo).state.head_checks == 2
