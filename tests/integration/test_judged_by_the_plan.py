"""What a task is judged by is fixed when the batch is planned (issue 21 #1): no lane can change
its own or a sibling's checks, the initiative or the config, whatever its scope; and the
integrator reads every check from the plan's intents, never from a lane's or candidate's tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imm_action.errors import InputError
from imm_action.model.state import ChildState
from imm_action.workspace import load_config_at
from tests.batch_helpers import (
    current,
    file_check,
    make_project,
    run_pass,
    work,
)
from tests.conftest import descriptor, git, intent, run_cli
from tests.integration.test_local_run import EXECUTOR

WEAK = json.dumps(
    intent("c", scope_hint=["c.txt"], acceptance=[
        {"id": "ok", "assertion": "anything", "verification": descriptor(["-c", "pass"])}
    ]), indent=2,
)  # fmt: skip


def children(repo: Path) -> dict[str, tuple[ChildState, str | None]]:
    return {c.task_id: (c.state, c.reason) for c in current(repo).state.children}


# -- through imm run: executors writing the plan's files from their lanes ---------------------
@pytest.mark.parametrize(
    ("target", "scope"),
    [
        ("docs/plans/c.intent.json", "docs/**"),  # a sibling's checks
        ("docs/plans/d.intent.json", "docs/**"),  # its own checks
        ("docs/initiatives/init.md", "docs/**"),  # the initiative
        (".github/imm.yml", ".github/**"),  # the config: lane_setup, executor_env
    ],
)
def test_a_lane_writing_the_plans_files_is_parked_whatever_its_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, scope: str
) -> None:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"d": "ok", "d.file": target, "c": "ok"}))
    repo = make_project(tmp_path / "r", {"c": [], "d": []}, scopes={"c": ["c.txt"], "d": [scope]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 1, err
    state, reason = children(repo)["d"]
    assert state is ChildState.NEEDS_HUMAN
    assert reason == f"lane_touches_plan: {target}"
    assert target not in git(repo, "diff", "--name-only", "main", "imm/init").split()


# -- at the integrator: forged lane commits and a weakened candidate --------------------------
def test_a_forged_lane_commit_rewriting_a_siblings_intent_is_parked_at_integration(
    tmp_path: Path,
) -> None:
    repo = make_project(
        tmp_path / "r", {"c": [], "d": []}, scopes={"c": ["c.txt"], "d": ["docs/**"]}
    )
    run_pass(repo)
    work(repo, "d", {"docs/plans/c.intent.json": WEAK})
    run_pass(repo)
    state, reason = children(repo)["d"]
    assert state is ChildState.NEEDS_HUMAN
    assert reason == "lane_touches_plan: docs/plans/c.intent.json"


def test_a_candidate_is_judged_by_the_plans_intents_even_when_its_tree_holds_weaker_ones(
    tmp_path: Path,
) -> None:
    """A person (or anything adopted) weakens c's check on the batch branch after the plan was
    made: c's wrong work still fails c's check as planned."""
    repo = make_project(
        tmp_path / "r", {"c": []}, checks={"c": file_check("c.txt", "right")}
    )  # fmt: skip
    run_pass(repo, admit=False)  # started; no lane runs, so a push is adopted
    tree_with_weak_intent(repo)
    run_pass(repo)  # adopts the person's push, admits c on it
    assert current(repo).state.adopted_heads
    work(repo, "c", {"c.txt": "wrong\n"})
    run_pass(repo)
    state, reason = children(repo)["c"]
    assert state is ChildState.NEEDS_HUMAN
    assert (reason or "").startswith("batch_integration_check_failed: c:ok failed")


def tree_with_weak_intent(repo: Path) -> None:
    git(repo, "checkout", "-q", "imm/init")
    (repo / "docs/plans/c.intent.json").write_text(WEAK)
    git(repo, "commit", "-qam", "loosen c's check")
    git(repo, "checkout", "-q", "main")


def test_lanes_run_with_the_config_the_batch_was_planned_with_not_the_working_trees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21 #1: an uncommitted edit of the config (a `lane_setup`, an `executor_env`)
    changes nothing the lanes run."""
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    marker = tmp_path / "lane-setup-ran"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": "{}\n"})
    (repo / ".github/imm.yml").write_text(f"lane_setup: touch {marker}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, _, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 0, err
    assert not marker.exists()


def test_the_config_of_a_commit_is_read_from_the_commit_under_the_working_trees_rules(
    tmp_path: Path,
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": "max_parallel: 3\n"}
    )
    (repo / ".github/imm.yml").write_text("max_parallel: 9\n")  # not committed
    head = git(repo, "rev-parse", "HEAD").strip()
    assert load_config_at(repo, head).config.max_parallel == 3
    git(repo, "rm", "-q", "-r", "-f", ".github")
    (repo / "elsewhere").mkdir()
    (repo / "elsewhere/imm.yml").write_text("max_parallel: 2\n")
    (repo / ".github").symlink_to("elsewhere")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config through a linked folder")
    linked = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(InputError, match=r"\.github is a symbolic link; its target is not read"):
        load_config_at(repo, linked)


def test_the_config_read_at_a_branch_follows_the_branch_and_at_a_commit_stays(
    tmp_path: Path,
) -> None:
    repo = make_project(
        tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": "max_parallel: 3\n"}
    )
    first = git(repo, "rev-parse", "HEAD").strip()
    assert load_config_at(repo, "HEAD").config.max_parallel == 3
    assert load_config_at(repo, first).config.max_parallel == 3
    (repo / ".github/imm.yml").write_text("max_parallel: 5\n")
    git(repo, "commit", "-qam", "more lanes")
    assert load_config_at(repo, "HEAD").config.max_parallel == 5  # read again, not remembered
    assert load_config_at(repo, first).config.max_parallel == 3
