"""Ids git cannot name a ref after are refused before any lane runs: `imm check` names the file
and line, `imm run` exits 2 with the reason instead of losing the lanes' work (issue 21 #5)."""

from __future__ import annotations

import io
import os
import shlex
from pathlib import Path

import pytest

from imm_action.errors import ImmError
from imm_action.git.refs import LocalRefStore
from imm_action.git.repo import GitRepo
from imm_action.lanes.run import LaneSpec, run_lane
from imm_action.verify.checks import Verifier
from imm_action.verify.result_cache import ResultCache
from tests.batch_helpers import make_project
from tests.conftest import git, initiative_markdown, run_cli
from tests.integration.test_local_run import EXECUTOR


@pytest.mark.parametrize(
    ("task", "why"),
    [("x..y", "'..'"), ("z.lock", "'.lock'"), ("w.", "ends with '.'")],
)
def test_check_refuses_a_task_id_git_cannot_name_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, why: str
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], task: []})
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2
    line = initiative_markdown({"a": [], task: []}).splitlines().index(f"- {task}") + 1
    shown = f"docs/initiatives/init.md:{line}: task id {task!r} is not a valid id: git cannot"
    assert shown in out + err
    assert why in out + err


def test_run_refuses_a_task_id_git_cannot_name_before_any_lane_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "x..y": []})
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 2
    assert "'x..y' is not a valid id: git cannot name a ref that holds '..'" in err
    assert git(repo, "for-each-ref", "refs/imm", "refs/heads/imm", "refs/heads/imm-lane") == ""


@pytest.mark.parametrize("slug", ["s..t", "s.lock"])
def test_run_refuses_a_slug_git_cannot_name_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], slug: str
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    code, _, err = run_cli(capsys, "run", slug, "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 2
    assert "is not a valid id: git cannot name a ref" in err


def test_a_lane_whose_refs_git_cannot_name_stops_before_its_executor_runs(tmp_path: Path) -> None:
    repo_path = make_project(tmp_path / "r", {"a": []})
    repo = GitRepo(repo_path)
    marker = tmp_path / "executor-ran"
    spec = LaneSpec(
        slug="s..t", batch_id="batch-x", task_id="a", slice_id="s-a",
        base_head=git(repo_path, "rev-parse", "HEAD").strip(), attempt=0, qa_failure_limit=1,
        executor=shlex.join(["touch", str(marker)]),
    )  # fmt: skip
    with pytest.raises(ImmError, match=r"git cannot name refs/heads/imm-lane/s\.\.t/a"):
        run_lane(
            spec, LocalRefStore(repo), Verifier(repo, ResultCache(), path_env=os.environ["PATH"]),
            environment=os.environ, log=io.StringIO(), git_date=lambda: "1700000000 +0000",
        )  # fmt: skip
    assert not marker.exists()
