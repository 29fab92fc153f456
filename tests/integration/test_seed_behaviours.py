"""Behaviours of the reference (immune-brain 5.1.0 lane mode, ../shared/reference/) that a
batch keeps here too: each test is named for one, with real repositories and the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import run_cli
from tests.integration.test_local_run import EXECUTOR


@pytest.fixture(autouse=True)
def behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "behaviour.json"
    path.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))


def reconcile(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo), *extra)
    return code, err


def test_a_resume_with_another_max_parallel_is_refused_with_batch_parallel_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    assert reconcile(capsys, repo, "--admit", "--max-parallel", "1")[0] == 0
    batch = current(repo).state
    code, err = reconcile(capsys, repo, "--admit", "--max-parallel", "2")
    assert code == 2
    assert f"batch_parallel_mismatch: batch {batch.batch_id} runs with max_parallel 1" in err
    assert "imm cancel init" in err
    assert "--max-parallel 2" in err
    assert current(repo).state == batch


def test_imm_run_resuming_with_another_max_parallel_exits_2_and_runs_no_lane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    assert reconcile(capsys, repo, "--admit", "--max-parallel", "1")[0] == 0
    before = current(repo)
    code, _, err = run_cli(
        capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR, "--max-parallel", "3"
    )
    assert code == 2
    assert "batch_parallel_mismatch" in err
    assert current(repo).commit == before.commit


def test_a_resume_with_the_same_or_no_max_parallel_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    assert reconcile(capsys, repo, "--admit", "--max-parallel", "1")[0] == 0
    assert reconcile(capsys, repo, "--max-parallel", "1")[0] == 0
    assert reconcile(capsys, repo)[0] == 0
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code != 2, err
    assert "batch_parallel_mismatch" not in err
    assert current(repo).state.max_parallel == 1
