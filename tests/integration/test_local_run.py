"""`imm run` end to end on real repositories with a real executor process per lane."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from imm_action.integrate.store import StateStore
from tests.batch_helpers import current, make_project, open_local
from tests.conftest import descriptor, git, run_cli

EXECUTOR = shlex.join(
    [sys.executable, str(Path(__file__).resolve().parents[1] / "lane_executor.py")]
)
DIAMOND = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


@pytest.fixture
def behave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def set_behaviour(**behaviours: str) -> Path:
        path = tmp_path / "behaviour.json"
        path.write_text(json.dumps(behaviours))
        monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))
        return path

    set_behaviour()
    return set_behaviour


def imm_run_argv(repo: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "imm_action",
        "run",
        "init",
        "--repo",
        str(repo),
        "--executor",
        EXECUTOR,
    ]


def imm_run(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR, *extra)


def children(repo: Path) -> dict[str, tuple[str, str | None]]:
    return {c.task_id: (str(c.state), c.reason) for c in current(repo).state.children}


def user_view(repo: Path) -> tuple[object, ...]:
    """The user's working tree files, index and current branch."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return (
        files,
        (repo / ".git/index").read_bytes(),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
    )


def test_a_diamond_runs_to_completion_and_leaves_the_user_checkout_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behave: object
) -> None:
    repo = make_project(tmp_path / "r", DIAMOND)
    before = user_view(repo)
    code, out, err = imm_run(capsys, repo)
    assert code == 0, err
    assert "completed" in out
    assert set(children(repo).values()) == {("integrated", None)}
    for task in DIAMOND:
        assert git(repo, "show", f"imm/init:{task}.txt") == f"{task}\n"
    assert user_view(repo) == before


def test_tasks_with_overlapping_scopes_never_run_at_the_same_time(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    tasks = {"p": [], "q": [], "r": []}
    scopes = {"p": ["shared"], "q": ["shared"], "r": ["r.txt"]}
    checks = {t: __import__("tests.batch_helpers", fromlist=["file_check"]).file_check(
        f"shared/{t}.txt" if t != "r" else "r.txt", t) for t in tasks}  # fmt: skip
    repo = make_project(tmp_path / "r", tasks, scopes=scopes, checks=checks)
    behave(
        p="sleep:0.6",
        q="sleep:0.6",
        r="sleep:0.6",
        **{"p.file": "shared/p.txt", "q.file": "shared/q.txt"},
    )
    timeline = tmp_path / "timeline"
    timeline.mkdir()
    monkeypatch.setenv("IMM_TEST_TIMELINE", str(timeline))
    code, _, err = imm_run(capsys, repo)
    assert code == 0, err
    span = {
        f.name.split(".")[0]: tuple(map(float, f.read_text().split())) for f in timeline.iterdir()
    }
    (p_start, p_end), (q_start, q_end), (r_start, r_end) = span["p"], span["q"], span["r"]
    assert p_end <= q_start or q_end <= p_start  # serialised by scope
    assert r_start < max(p_end, q_end)
    assert min(p_start, q_start) < r_end


def test_a_failed_check_is_retried_with_its_findings_and_then_passes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    behave(a="fail_once")
    code, _, _ = imm_run(capsys, repo)
    assert code == 0
    child = current(repo).state.children[0]
    assert (str(child.state), child.qa_failures) == ("integrated", 1)


def test_the_qa_failure_limit_parks_the_task_and_skips_its_dependents(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"], "c": []})
    behave(a="always_wrong")
    code, out, _ = imm_run(capsys, repo)
    assert code == 1
    assert children(repo) == {
        "a": ("needs_human", "QA failure limit reached"),
        "b": ("skipped_blocked", "dependency a parked"),
        "c": ("integrated", None),
    }
    assert f"\n  imm retry init a --repo {repo}\n" in out


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("outside", "dirty_outside_scope: other.txt"),
        ("empty", "lane_empty: the executor changed nothing"),
        ("crash", "executor exited with 3"),
    ],
)
def test_a_lane_that_cannot_commit_parks_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,
    behaviour: str,
    reason: str,  # type: ignore[no-untyped-def]
) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    behave(a=behaviour)
    code, _, _ = imm_run(capsys, repo)
    assert code == 1
    assert children(repo) == {"a": ("needs_human", reason)}


def test_retry_after_fixing_the_cause_completes_the_batch(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    fix = tmp_path / "fixed"
    monkeypatch.setenv("IMM_TEST_FIX", str(fix))
    behave(a="needs_fix")
    assert imm_run(capsys, repo)[0] == 1
    fix.write_text("")
    code, _, _ = run_cli(capsys, "retry", "init", "a", "--repo", str(repo))
    assert code == 0
    assert children(repo) == {"a": ("pending", None), "b": ("pending", None)}
    assert imm_run(capsys, repo)[0] == 0
    assert set(children(repo).values()) == {("integrated", None)}


def test_retry_of_a_task_that_is_not_parked_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    behave(a="crash")
    imm_run(capsys, repo)
    code, _, err = run_cli(capsys, "retry", "init", "b", "--repo", str(repo))
    assert code == 2
    assert "cannot retry b: it is integrated" in err


def test_cancel_stops_the_batch_and_its_lanes(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    behave,  # type: ignore[no-untyped-def]
) -> None:
    import subprocess
    import time

    repo = make_project(tmp_path / "r", {"a": [], "b": ["a"]})
    behave(a="sleep:30")
    runner = subprocess.Popen(
        imm_run_argv(repo),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if (
            git(repo, "for-each-ref", "refs/imm/batches").strip()
            and children(repo)["a"][0] == "lane_admitted"
        ):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    code, out, _ = run_cli(capsys, "cancel", "init", "--repo", str(repo))
    assert code == 0
    assert "cancelled" in out
    runner.communicate(timeout=20)  # it notices within a second and stops its lanes
    assert current(repo).state.batch_state == "cancelled"
    assert children(repo)["a"] == ("needs_human", "cancelled")


def test_ctrl_c_before_the_first_pass_ends_exits_130_with_the_command_to_start_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behave, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imm_action.local.coordinator import Coordinator

    def interrupted(self: Coordinator) -> None:
        raise KeyboardInterrupt  # the Ctrl-C lands while the batch is being opened

    monkeypatch.setattr(Coordinator, "_pass", interrupted)
    repo = make_project(tmp_path / "r", DIAMOND)
    code, _, err = imm_run(capsys, repo)
    assert code == 130
    assert "imm run: interrupted before the first pass ended; start it again with: " in err
    assert "imm run init" in err
    assert git(repo, "for-each-ref", "refs/imm/").strip() == ""


def test_a_freed_lane_slot_is_filled_while_the_candidate_before_it_waits_for_its_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behave
) -> None:
    # One lane slot. When a's lane ends, b is admitted in the same pass, before a's candidate
    # is verified and lands: the audit log holds a state with a waiting for the integrator and
    # b's lane at work. (Before, the pass that saw a's lane end verified and landed a first.)
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    code, _, err = imm_run(capsys, repo, "--max-parallel", "1")
    assert code == 0, err
    batch = current(repo)
    states = [
        {c.task_id: str(c.state) for c in stored.state.children}
        for stored in StateStore(open_local(repo).refs).history(batch.state.batch_id)
    ]
    assert {"a": "lane_committed", "b": "lane_admitted"} in states
    assert all(list(s.values()).count("lane_admitted") <= 1 for s in states)  # one slot
    assert batch.state.batch_state == "completed"


@pytest.fixture
def behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test executor's behaviour file (every task: ok), as every lane will read it."""
    path = tmp_path / "behaviour.json"
    path.write_text("{}")
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(path))
    return path


@pytest.mark.usefixtures("behaviour")
def test_a_typo_in_an_intent_is_refused_before_check_setup_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41 #4: the intents and the plan first, in a second; then the long installs."""
    setup = "check_setup: sh -c 'echo installing; exit 7'\n"
    repo = make_project(
        tmp_path / "r", {"a": [], "b": ["a"]}, extra_files={".github/imm.yml": setup}
    )
    (repo / "docs/plans/b.intent.json").write_text('{"contract": "typo"\n')
    git(repo, "commit", "-qam", "b's intent, broken")
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 2, out + err
    assert "docs/plans/b.intent.json" in err
    assert "check_setup" not in out + err  # its command never started


def _editable_venv(venv: Path, project: Path) -> None:
    """A venv where `pip install -e <project>` was run: pip's PEP 610 record of it."""
    record = venv / "lib/python3.11/site-packages/calc-0.1.dist-info/direct_url.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}}))


@pytest.mark.usefixtures("behaviour")
@pytest.mark.parametrize("editable", [True, False])
def test_a_check_that_cannot_import_the_project_says_check_setup_when_the_venv_has_it_editable(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    editable: bool,
) -> None:
    """Issue 41 #5: the user's venv holds the project installed editable, no check_setup."""
    checks = {"a": descriptor(["-c", "import calc_not_in_this_tree"])}
    repo = make_project(tmp_path / "r", {"a": []}, checks=checks)
    venv = tmp_path / "venv"
    if editable:
        _editable_venv(venv, repo)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 1, out + err
    hint = "holds an editable install of this project"
    assert (hint in err) is editable
    if editable:
        assert "install the project in check_setup instead" in err


def test_the_failures_log_names_a_task_a_guard_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behaviour: Path
) -> None:
    """Issue 41 #7: a refusal (a change outside the task's scope) runs no failed command, and
    the log of every failure still names it."""
    behaviour.write_text(json.dumps({"a": "outside"}))
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    assert code == 1, out + err
    parked = {c.task_id: c for c in current(repo).state.children}["a"]
    assert parked.state == "needs_human"
    assert not parked.failures
    logs = list((repo / ".git/imm/logs").glob("*.failures.log"))
    assert len(logs) == 1
    assert f"every failure in full: {logs[0]}" in out
    assert f"task a: {parked.reason}" in logs[0].read_text()
