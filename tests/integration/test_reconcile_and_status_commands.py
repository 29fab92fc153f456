"""`imm reconcile` and `imm status` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.batch_helpers import make_project, publish, work
from tests.conftest import git, run_cli, snapshot

_run = run_cli


def test_reconcile_then_status_reports_the_batch_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    code, _, err = _run(capsys, "reconcile", "init", "--admit", "--repo", str(repo))
    assert code == 0
    assert "admitted a" in err
    work(repo, "a")
    _run(capsys, "reconcile", "init", "--admit", "--repo", str(repo))
    work(repo, "b")
    code, out, _ = _run(capsys, "reconcile", "init", "--repo", str(repo), "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["batch_state"] == "completed"
    assert [c["state"] for c in report["children"]] == ["integrated", "integrated"]
    code, out, _ = _run(capsys, "status", "--repo", str(repo), "--format", "json")
    assert (code, json.loads(out)) == (0, report)


def test_a_parked_batch_exits_1_with_the_next_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    _run(capsys, "reconcile", "init", "--admit", "--repo", str(repo))
    publish(repo, "a", None, state="needs_human", reason="QA failure limit reached")
    code, out, _ = _run(capsys, "reconcile", "init", "--repo", str(repo))
    assert code == 1
    assert f"\n  imm retry init a --repo {repo}\n" in out


def test_status_markdown_has_the_task_table_and_a_coloured_dag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    _run(capsys, "reconcile", "init", "--admit", "--repo", str(repo))
    code, out, _ = _run(capsys, "status", "init", "--repo", str(repo), "--format", "markdown")
    assert code == 0
    assert "| `a` | lane_admitted | imm-lane/init/a |" in out
    assert "classDef lane_admitted" in out


def test_status_without_a_batch_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    before = snapshot(repo)
    code, _, err = _run(capsys, "status", "--repo", str(repo))
    assert code == 2
    assert "no batch in this repository" in err
    assert snapshot(repo) == before


def test_reconcile_of_a_bad_initiative_exits_2_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    (repo / "docs/initiatives/init.md").write_text("## s: x\nTasks:\n- a\nBlocked by: ghost\n")
    git(repo, "commit", "-qam", "a bad initiative")
    code, _, err = _run(capsys, "reconcile", "init", "--admit", "--repo", str(repo))
    assert code == 2
    assert "docs/initiatives/init.md:4:" in err
    assert not (repo / ".git/refs/imm").exists()
