"""Behaviours of the reference (immune-brain 5.1.0 lane mode, ../shared/reference/) that a
batch keeps here too: each test is named for one, with real repositories and the real CLI."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from imm_action.model.state import BatchState, ChildState
from tests.batch_helpers import current, make_project
from tests.conftest import git, run_cli
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


def test_a_batch_that_used_its_max_children_budget_stops_and_its_continuation_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": ["a"], "d": []})
    run = ("run", "init", "--repo", str(repo), "--executor", EXECUTOR, "--max-parallel", "1")
    code, _, err = run_cli(capsys, *run, "--max-children", "2")
    assert code == 1, err
    first = current(repo).state
    assert first.batch_state is BatchState.BUDGET_STOPPED
    assert first.budget.max_children == 2
    done = [c.task_id for c in first.children if c.state is ChildState.INTEGRATED]
    assert done == ["a", "b"]
    code, _, err = run_cli(capsys, *run)
    assert code == 0, err
    second = current(repo).state
    assert second.batch_state is BatchState.COMPLETED
    assert second.continues is not None
    assert second.continues.batch_id == first.batch_id
    assert {c.task_id: c.commit for c in first.children if c.commit}.items() <= {
        c.task_id: c.commit for c in second.children
    }.items()


def test_max_children_in_the_config_is_the_budget_of_a_new_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": [], "b": [], "c": []},
        extra_files={".github/imm.yml": "max_children: 1\n"},
    )  # fmt: skip
    code, out, _ = run_cli(capsys, "plan", "init", "--repo", str(repo))
    assert code == 0
    assert json.loads(out)["budget"]["max_children"] == 1
    code, out, _ = run_cli(capsys, "plan", "init", "--repo", str(repo), "--max-children", "2")
    assert json.loads(out)["budget"]["max_children"] == 2
    assert reconcile(capsys, repo, "--admit")[0] == 0
    assert current(repo).state.budget.max_children == 1


COMMITTER_CONFIG = "committer:\n  name: Release Bot\n  email: release-bot@example.com\n"


def test_the_committer_set_in_the_config_commits_every_lane_commit_and_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": [], "b": ["a"]}, extra_files={".github/imm.yml": COMMITTER_CONFIG}
    )
    code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    landed = git(repo, "log", "--format=%cn <%ce>", "main..imm/init").splitlines()
    assert landed == ["Release Bot <release-bot@example.com>"] * 2
    lane_commits = [c.lane.lane_commit for c in current(repo).state.children if c.lane]
    assert len(lane_commits) == 2
    for commit in lane_commits:
        shown = git(repo, "show", "-s", "--format=%cn <%ce>", str(commit)).strip()
        assert shown == "Release Bot <release-bot@example.com>"


@pytest.mark.parametrize(
    "committer",
    ["name: Eve <evil@x>\n  email: e@x.org", "name: Eve\n  email: not-an-address"],
)
def test_a_committer_that_would_forge_a_commit_header_is_refused_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], committer: str
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": f"committer:\n  {committer}\n"}
    )
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert ".github/imm.yml:" in out + err
    assert "committer" in out + err


def test_require_spec_binding_true_is_refused_at_its_line_rather_than_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = "max_parallel: 2\nrequire_spec_binding: true\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2
    assert ".github/imm.yml:2:" in out + err
    assert "binds no spec pairs" in out + err
    repo = make_project(
        tmp_path / "ok", {"a": []}, extra_files={".github/imm.yml": "require_spec_binding: false\n"}
    )
    assert run_cli(capsys, "check", "--repo", str(repo))[0] == 0


def test_the_commands_printed_to_paste_next_keep_the_executor_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 #8: pasting `imm run …` must run the executor the person chose, not the
    config's."""
    behaviour = tmp_path / "wrong.json"
    behaviour.write_text(json.dumps({"a": "always_wrong"}))
    repo = make_project(tmp_path / "r", {"a": []})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 1
    runs = [line.strip() for line in (out + err).splitlines() if " run init " in line]
    assert runs
    assert all(line.endswith(f"--executor {shlex.quote(EXECUTOR)}") for line in runs)
    retries = [line for line in (out + err).splitlines() if " retry init a " in line]
    assert retries
    assert all("--executor" not in line for line in retries)
