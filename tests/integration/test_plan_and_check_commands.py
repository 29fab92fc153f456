"""`imm plan` and `imm check` on real git repositories: outputs, exit codes, located errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.batch_helpers import make_project
from tests.conftest import (
    descriptor,
    git,
    initiative_files,
    intent,
    make_repo,
    run_cli,
    snapshot,
    write_files,
)

DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


_run = run_cli


@pytest.fixture
def diamond(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", initiative_files("init", DIAMOND))


def test_plan_json_is_exactly_the_plan_model(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "plan", "init", "--repo", str(diamond), "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert list(plan) == ["contract", "initiative", "carrier", "order", "children", "enrollable",
                          "excluded", "budget", "max_parallel", "parallel_groups",
                          "scope_conflicts", "plan_digest", "check_orders"]  # fmt: skip
    assert plan["order"] == ["a", "b", "c", "d"]
    assert plan["parallel_groups"] == [["a"], ["b", "c"], ["d"]]
    assert plan["children"][3]["blocked_by"] == ["a", "b", "c"]
    assert plan["max_parallel"] == 4


def test_plan_output_is_byte_identical_across_runs(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(capsys, "plan", "init", "--repo", str(diamond))
    second = _run(capsys, "plan", "init", "--repo", str(diamond))
    assert first == second


def test_plan_matrix_lists_the_first_wave_as_lane_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path / "r", initiative_files("wide", {"a": [], "b": [], "c": [], "d": ["a"]})
    )
    code, out, _ = _run(
        capsys, "plan", "wide", "--repo", str(repo), "--format", "matrix", "--max-parallel", "2"
    )
    assert code == 0
    head = git(repo, "rev-parse", "HEAD").strip()
    assert json.loads(out) == {
        "include": [
            {"task": "a", "base": head, "task_id": "a", "slice_id": "s-a",
             "lane_branch": "imm-lane/wide/a", "intent_path": "docs/plans/a.intent.json"},
            {"task": "b", "base": head, "task_id": "b", "slice_id": "s-b",
             "lane_branch": "imm-lane/wide/b", "intent_path": "docs/plans/b.intent.json"},
        ]
    }  # fmt: skip


def test_plan_matrix_has_the_shape_of_the_plan_jobs_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 #11: a script written against one works against the other."""
    repo = make_repo(tmp_path / "r", initiative_files("wide", {"a": [], "b": []}))
    _, planned, _ = _run(capsys, "plan", "wide", "--repo", str(repo), "--format", "matrix")
    outputs = tmp_path / "outputs"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GITHUB_OUTPUT", str(outputs))
        patch.setenv("GITHUB_ACTIONS", "true")
        assert _run(capsys, "reconcile", "wide", "--repo", str(repo), "--admit")[0] == 0
    lines = outputs.read_text().splitlines()  # `name<<delimiter`, the value, the delimiter
    (at,) = [i for i, line in enumerate(lines) if line.startswith("matrix<<")]
    assert json.loads(lines[at + 1]) == json.loads(planned)


def test_plan_markdown_has_the_table_and_a_coloured_grouped_mermaid_dag(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "plan", "init", "--repo", str(diamond), "--format", "markdown")
    assert code == 0
    assert "| `d` | `s-d` | enrollable |" in out
    assert '```mermaid\nflowchart TD\n  subgraph g1["parallel group 1"]' in out
    assert "  t1 --> t3" in out
    assert "  t0 --> t3" not in out  # direct edges only, not the closure
    assert "classDef enrollable" in out


def test_plan_excludes_an_invalid_intent_and_says_where_it_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files["docs/plans/b.intent.json"] = (
        '{\n  "contract": "assurance_kernel/task_intent/v1",\n  "oops": 1\n}\n'
    )
    repo = make_repo(tmp_path / "r", files)
    code, out, err = _run(capsys, "plan", "init", "--repo", str(repo))
    assert code == 0
    children = {child["task_id"]: child for child in json.loads(out)["children"]}
    assert children["b"]["status"] == "needs_human"
    assert children["b"]["reason"].startswith(
        "invalid_intent: docs/plans/b.intent.json:1: task_id: "
    )
    assert "docs/plans/b.intent.json:3: oops: unknown key" in children["b"]["reason"]
    assert children["d"]["status"] == "blocked"
    assert "docs/plans/b.intent.json:3: oops: unknown key" in err


def test_plan_of_a_missing_initiative_is_a_usage_error(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "plan", "nope", "--repo", str(diamond))
    assert code == 2
    assert "docs/initiatives/nope.md does not exist" in err


def test_plan_outside_a_git_work_tree_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "plan", "x", "--repo", str(tmp_path))
    assert code == 2
    assert "not inside a git work tree" in err


def test_plan_refuses_more_than_256_lanes(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "plan", "init", "--repo", str(diamond), "--max-parallel", "257")
    assert code == 2
    assert "at most 256 lanes per run" in err


def test_check_passes_on_a_clean_repository(
    diamond: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "check", "--repo", str(diamond))
    assert (code, out) == (0, "")
    assert "no problems (1 initiative, 4 intents checked)" in err


def _v1() -> str:
    return json.dumps(
        {"contract": "assurance_kernel/verification_descriptor/v1", "command": "pytest -q"}
    )


def _intent_text(**overrides: Any) -> str:
    return json.dumps({**intent("b"), **overrides}, indent=2) + "\n"


MALFORMED_INTENTS = {
    "bad JSON": (
        '{\n  "task_id": "b",\n  oops\n}\n',
        "docs/plans/b.intent.json:3: is not valid JSON",
    ),
    "unknown key": (_intent_text(colour="red"), "docs/plans/b.intent.json:18: colour: unknown key"),
    "bad id": (
        _intent_text(task_id="b!"),
        "docs/plans/b.intent.json:3: task_id: String should match",
    ),
    "v1 descriptor": (
        _intent_text(acceptance=[{"id": "x", "assertion": "y", "verification": _v1()}]),
        "docs/plans/b.intent.json:9: acceptance[0].verification: "
        "verification_contract_migration_required",
    ),
    "oversize file": (
        _intent_text(goal="x" * 70_000),
        "docs/plans/b.intent.json: is larger than 65536 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_INTENTS))
def test_check_refuses_a_malformed_intent_naming_file_and_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, expected = MALFORMED_INTENTS[case]
    files = initiative_files("init", DIAMOND)
    files["docs/plans/b.intent.json"] = text
    repo = make_repo(tmp_path / "r", files)
    before = snapshot(repo)
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert expected in out
    assert snapshot(repo) == before


def test_check_reads_committed_files_and_says_so_when_some_are_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "r", initiative_files("init", DIAMOND))
    (repo / "docs/plans/e.intent.json").write_text("{broken", encoding="utf-8")
    code, out, err = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert "e.intent.json" not in out
    assert (
        "imm check: no problems in the committed files (1 initiative, 4 intents checked), but "
        "not checked, because not committed: docs/plans/e.intent.json — imm reads committed "
        "files only (what the lanes read); commit them, then run imm check again\n"
    ) in err


def test_check_of_staged_but_uncommitted_intents_says_nothing_was_checked_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 #9: `0 intents checked` and exit 0 read as a pass."""
    repo = make_repo(tmp_path / "r", {"README.md": "hi\n"})
    for path, text in initiative_files("init", DIAMOND).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(str(text), encoding="utf-8")
    git(repo, "add", "-A")
    code, _, err = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert "(0 initiatives, 0 intents checked), but not checked, because not committed: " in err
    assert "commit them, then run imm check again" in err


def test_an_uncommitted_fix_does_not_pass_check_and_then_crash_the_lanes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files["docs/plans/b.intent.json"] = "{broken"
    repo = make_repo(tmp_path / "r", files)
    write_files(repo, {"docs/plans/b.intent.json": json.dumps(intent("b"))})
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert "docs/plans/b.intent.json:1: is not valid JSON" in out
    code, planned, _ = _run(capsys, "plan", "init", "--repo", str(repo))
    assert json.loads(planned)["children"][1]["status"] == "needs_human"


def test_an_intent_only_in_the_working_tree_is_named_as_not_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    del files["docs/plans/d.intent.json"]
    repo = make_repo(tmp_path / "r", files)
    write_files(repo, {"docs/plans/d.intent.json": json.dumps(intent("d"))})
    code, _, err = _run(capsys, "plan", "init", "--repo", str(repo))
    assert code == 0
    assert "docs/plans/d.intent.json: is not committed" in err


def test_check_refuses_a_symlinked_intent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files["elsewhere/b.json"] = files.pop("docs/plans/b.intent.json")
    repo = make_repo(tmp_path / "r", files, commit=False)
    os.symlink("../../elsewhere/b.json", repo / "docs/plans/b.intent.json")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    before = snapshot(repo)
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert "docs/plans/b.intent.json: must not be reached through a symlink" in out
    assert snapshot(repo) == before


def test_check_refuses_an_intent_dir_reached_through_a_symlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {
        f"real/{k.removeprefix('docs/plans/')}": v
        for k, v in initiative_files("init", DIAMOND).items()
        if "plans" in k
    }
    files["docs/initiatives/init.md"] = initiative_files("init", DIAMOND)[
        "docs/initiatives/init.md"
    ]
    repo = make_repo(tmp_path / "r", files, commit=False)
    os.symlink("../real", repo / "docs/plans")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    code, out, _ = _run(capsys, "plan", "init", "--repo", str(repo))
    assert code == 0
    assert "docs/plans is a link" in json.loads(out)["children"][0]["reason"]


INITIATIVE_ERRORS = {
    "cycle": ("## s1: A\nTasks:\n- a\nBlocked by: b\n## s2: B\nTasks:\n- b\nBlocked by: a\n",
              "docs/initiatives/init.md:3: Task a is on a dependency cycle"),
    "unknown dependency": ("## s1: A\nTasks:\n- a\nBlocked by: ghost\n",
                           "docs/initiatives/init.md:4: Task a is blocked by 'ghost'"),
    "bad id": ("## s1: A\nTasks:\n- a b\n",
               "docs/initiatives/init.md:3: task id 'a b' is not a valid id"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(INITIATIVE_ERRORS))
@pytest.mark.parametrize("command", ["check", "plan"])
def test_a_malformed_initiative_exits_2_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    text, expected = INITIATIVE_ERRORS[case]
    files = initiative_files("init", {"a": [], "b": []})
    files["docs/initiatives/init.md"] = text
    repo = make_repo(tmp_path / "r", files)
    before = snapshot(repo)
    argv = (
        ["check", "--repo", str(repo)]
        if command == "check"
        else ["plan", "init", "--repo", str(repo)]
    )
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert expected in out + err
    assert snapshot(repo) == before


def test_check_reports_a_task_without_an_intent_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    del files["docs/plans/c.intent.json"]
    repo = make_repo(tmp_path / "r", files)
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert (
        "docs/initiatives/init.md:14: Task c has no intent: create docs/plans/c.intent.json" in out
    )


def test_check_with_base_reports_only_what_the_change_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files["docs/plans/a.intent.json"] = "{broken"
    repo = make_repo(tmp_path / "r", files)
    (repo / "docs/plans/b.intent.json").write_text("{also broken", encoding="utf-8")
    git(repo, "commit", "-qam", "break b")
    code, out, _ = _run(capsys, "check", "--repo", str(repo), "--base", "HEAD~1")
    assert code == 2
    assert "docs/plans/b.intent.json" in out
    assert "docs/plans/a.intent.json" not in out


def test_config_unknown_keys_warn_with_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files[".github/imm.yml"] = "# settings\nmax_parallel: 2\ncolour: red\ncommands:\n  shout: yes\n"
    repo = make_repo(tmp_path / "r", files)
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert code == 0
    assert ".github/imm.yml:3: warning: unknown setting 'colour' is ignored" in out
    assert ".github/imm.yml:5: warning: unknown setting 'commands.shout' is ignored" in out


def test_config_bad_values_are_errors_with_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = initiative_files("init", DIAMOND)
    files[".github/imm.yml"] = "max_parallel: 2\nqa_failure_limit: zero\n"
    repo = make_repo(tmp_path / "r", files)
    code, _, err = _run(capsys, "plan", "init", "--repo", str(repo))
    assert code == 2
    assert ".github/imm.yml:2: qa_failure_limit: Input should be a valid integer" in err


def test_the_console_script_maps_errors_to_exit_codes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "plan", "x", "--repo", str(tmp_path / "missing")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no such directory" in done.stderr
    usage = subprocess.run(
        [sys.executable, "-m", "imm_action", "plan"], capture_output=True, check=False
    )
    assert usage.returncode == 2


def test_descriptor_helper_round_trips() -> None:
    assert json.loads(descriptor())["command"]["executable"] == "python3"


def test_the_config_is_read_from_the_path_imm_config_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = initiative_files("init", DIAMOND)
    files[".github/imm.yml"] = "max_parallel: 2\n"
    files["ci/imm.yml"] = "max_parallel: 1\ncolour: red\n"
    repo = make_repo(tmp_path / "r", files)
    monkeypatch.setenv("IMM_CONFIG", "ci/imm.yml")
    code, out, _ = _run(capsys, "plan", "init", "--repo", str(repo), "--format", "json")
    assert code == 0
    assert json.loads(out)["max_parallel"] == 1
    code, out, _ = _run(capsys, "check", "--repo", str(repo))
    assert "ci/imm.yml:2: warning: unknown setting 'colour' is ignored" in out


@pytest.mark.parametrize("path", ["../imm.yml", "/etc/imm.yml", "ci/../x.yml", "ci/imm.toml"])
def test_a_config_path_that_could_leave_the_repository_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    repo = make_repo(tmp_path / "r", initiative_files("init", DIAMOND))
    monkeypatch.setenv("IMM_CONFIG", path)
    code, out, err = _run(capsys, "plan", "init", "--repo", str(repo))
    assert (code, out) == (2, "")
    assert f"IMM_CONFIG={path!r}: the config must be a .yml file inside the repository" in err


def _scope_conflict_project(root: Path, *, s_after_c: bool = True) -> Path:
    """s's scope covers tests/**; c's check tests tests/test_c.py, which c's lane writes."""
    return make_project(
        root, {"c": [], "s": ["c"] if s_after_c else []},
        checks={"c": descriptor(["-m", "pytest", "tests/test_c.py"])},
        scopes={"c": ["c.txt", "tests/test_c.py"], "s": ["tests/**"]},
    )  # fmt: skip


SCOPE_CONFLICT = (
    "scope_covers_check: s runs after c, whose check names tests/test_c.py; once c has landed "
    "a lane of s may not change or remove it (lane_touches_check) — narrow s's scope_hint to "
    "leave tests/test_c.py out, or retire the tests it means to change in its intent "
    "(`retires_tests`) and name them in its own check"
)


def test_check_names_a_later_scope_that_covers_an_earlier_tasks_check_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 42 #3: found before any lane runs, not after the agent's work is refused."""
    repo = _scope_conflict_project(tmp_path / "r")
    text = (repo / "docs/plans/s.intent.json").read_text()
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"scope_hint"' in row)
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 0, out + err  # a warning: s's lane may never touch the file
    assert f"docs/plans/s.intent.json:{line}: {SCOPE_CONFLICT}" in out


def test_plan_and_run_warn_of_a_later_scope_that_covers_an_earlier_tasks_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _scope_conflict_project(tmp_path / "r")
    _, _, err = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "json")
    assert f"warning: docs/plans/s.intent.json: {SCOPE_CONFLICT}" in err
    _, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", "true")
    assert err.count(SCOPE_CONFLICT) == 1  # once, before any lane


def test_an_unordered_scope_that_covers_a_named_path_is_ordered_first_and_warned_of_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58 #1: the task that builds what another tests runs first; nothing to fix."""
    repo = _scope_conflict_project(tmp_path / "r", s_after_c=False)
    code, out, err = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "json")
    plan = json.loads(out)
    assert (code, err) == (0, "")
    assert plan["check_orders"] == [{"task_id": "c", "after": "s", "path": "tests/test_c.py"}]
    assert plan["parallel_groups"] == [["s"], ["c"]]
    # an order, not a dependency: c starts once s has ended, landed or parked
    assert [child["blocked_by"] for child in plan["children"]] == [[], []]
    code, out, _ = run_cli(capsys, "check", "--repo", str(repo))
    assert (code, "scope_covers_check" in out) == (0, False)
    code, out, _ = run_cli(capsys, "plan", "init", "--repo", str(repo), "--format", "markdown")
    said = "`c` runs after `s`: `s`'s scope covers `tests/test_c.py`, which `c`'s check names"
    assert said in out


def test_check_names_a_scope_that_covers_the_script_a_branch_check_runs_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58 #2: the suite's script is the plan's; a lane rewriting it to `exit 0` is
    refused whatever its scope, and `imm check` says so before any lane runs."""
    repo = make_project(
        tmp_path / "r", {"s": []}, scopes={"s": ["scripts/**"]},
        extra_files={"scripts/test.sh": "exit 1\n",
                     ".github/imm.yml": "branch_checks:\n  - sh scripts/test.sh\n"},
    )  # fmt: skip
    text = (repo / "docs/plans/s.intent.json").read_text()
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"scope_hint"' in row)
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 0, out + err
    assert (
        f"docs/plans/s.intent.json:{line}: scope_covers_plan: s may change scripts/test.sh, "
        "which branch check branch:1 runs; no lane may change it (lane_touches_plan) — narrow "
        "s's scope_hint to leave scripts/test.sh out"
    ) in out
