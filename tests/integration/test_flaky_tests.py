"""Flake-safe blame on real runs (issue 61): the repository's suite, run by pytest in the
sandbox, holds a test whose outcomes a schedule outside the repository dictates, one per run
(`F` fails it, anything else passes). A failure that passes a rerun blames no lane, stops no
batch, and is reported; a broken lane is still parked beside it; a test the config lists never
blocks. Real git, the GitHub-shaped passes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from imm_action.render import github_batch_markdown
from tests.batch_helpers import current, file_check, make_project, run_pass, work
from tests.conftest import PYTEST_CHECK, initiative_files, intent

FLAKY = "tests/test_value.py::test_flaky"
VALUE = "def value():\n    return 1\n"
BROKEN = "def value():\n    return 2\n"


def _tests(schedule: Path, marks: Path | None) -> str:
    return (
        "import pathlib\n\nfrom pkg.value import value\n\n\n"
        "def test_good():\n    assert value() == 1\n\n\n"
        "def test_flaky():\n"
        f"    schedule = pathlib.Path({str(schedule)!r})\n"
        "    said = schedule.read_text()\n"
        "    schedule.write_text(said[1:])\n"
        "    assert not said.startswith('F')\n"
    ) + ("" if marks is None else (
        f"\n\ndef test_marks():\n    with open({str(marks)!r}, 'a') as marks:\n"
        "        marks.write('x')\n"
    ))  # fmt: skip


def _project(
    root: Path, schedule: Path, listed: tuple[str, ...] = (), marks: Path | None = None
) -> Path:
    """Tasks a and b, each in a file of its own (b may break `value`); the suite is the
    branch check; `marks`: a file every whole run of the suite writes a mark in."""
    schedule.write_text("")
    schedule.chmod(0o666)
    suite = shlex.join(["python3", *PYTEST_CHECK, "tests"])
    config = f"branch_checks:\n  - {json.dumps(suite)}\n"
    if listed:
        config += f"flaky_tests: {json.dumps(list(listed))}\n"
    # a second initiative, `next` (tasks c and d): a later batch of the same repository
    later = initiative_files("next", {"c": [], "d": []}, {
        task: intent(task, scope_hint=[f"{task}.txt"], acceptance=[{"id": "ok",
                     "assertion": "done", "verification": file_check(f"{task}.txt", task)}])
        for task in ("c", "d")
    })  # fmt: skip
    return make_project(
        root, {"a": [], "b": []}, scopes={"a": ["a.txt"], "b": ["b.txt", "pkg/**"]},
        extra_files={"pkg/__init__.py": "", "pkg/value.py": VALUE, **later,
                     "tests/test_value.py": _tests(schedule, marks), ".github/imm.yml": config},
    )  # fmt: skip


def _marked_project(tmp_path: Path, open_dir: Path) -> tuple[Path, Path, Path]:
    """The project, its base passed, with a suite that marks every whole run of it in a file:
    the repository, the flaky test's schedule and the marks."""
    schedule, marks = open_dir / "schedule", open_dir / "marks"
    marks.write_text("")
    marks.chmod(0o666)
    repo = _project(tmp_path / "r", schedule, marks=marks)
    run_pass(repo)
    return repo, schedule, marks


def _states(repo: Path) -> dict[str, str]:
    return {child.task_id: str(child.state) for child in current(repo).state.children}


def test_a_suite_failing_once_on_the_stack_lands_it_and_is_reported(
    tmp_path: Path, open_dir: Path
) -> None:
    schedule = open_dir / "schedule"
    repo = _project(tmp_path / "r", schedule)
    run_pass(repo)  # the base passes the suite
    work(repo, "a")
    work(repo, "b")
    schedule.write_text("F")  # the stack's top fails it once; its rerun passes
    run_pass(repo)
    assert _states(repo) == {"a": "integrated", "b": "integrated"}
    stored = current(repo)
    assert stored.state.flaky_tests == {FLAKY: 1}
    assert stored.report is not None
    said = f"flaky test {FLAKY}: flipped 1 time in this batch; no lane was blamed for it"
    assert said in stored.report.flaky
    markdown = github_batch_markdown(stored.report, stored.state, "https://github.com/o/r")
    assert f"- flaky: `{FLAKY}` flipped 1 time" in markdown


def test_a_test_that_flipped_in_an_earlier_batch_is_known_flaky_in_the_next(
    tmp_path: Path, open_dir: Path
) -> None:
    repo, schedule, marks = _marked_project(tmp_path, open_dir)
    work(repo, "a")
    work(repo, "b")
    schedule.write_text("F")  # it flips on the first batch's top
    run_pass(repo)
    assert current(repo).state.flaky_tests == {FLAKY: 1}
    marks.write_text("")
    run_pass(repo, "next")  # the next batch starts knowing it (the base: one whole run)
    assert current(repo, "next").state.flaky_before == {FLAKY: 1}
    work(repo, "c", slug="next")
    work(repo, "d", slug="next")
    # the top fails it twice: a known flaky test gets every rerun there before a bisection
    schedule.write_text("FF")
    run_pass(repo, "next")
    stored = current(repo, "next")
    assert {c.task_id: str(c.state) for c in stored.state.children} == {
        "c": "integrated", "d": "integrated"
    }  # fmt: skip
    assert marks.read_text() == "x" * 4  # the base, the top and its two reruns: no probe
    assert stored.report is not None
    said = f"flaky test {FLAKY}: flipped 1 time in this batch (1 time in this repository's "
    assert any(line.startswith(said) for line in stored.report.flaky), stored.report.flaky


def test_a_flaky_failure_during_bisection_blames_no_lane(tmp_path: Path, open_dir: Path) -> None:
    schedule = open_dir / "schedule"
    repo = _project(tmp_path / "r", schedule)
    run_pass(repo)
    work(repo, "a")
    work(repo, "b")
    # the top fails, and its rerun; the probe of a's candidate fails, and passes its rerun;
    # the top's next rerun passes: nobody broke anything
    schedule.write_text("FFFP")
    run_pass(repo)
    assert _states(repo) == {"a": "integrated", "b": "integrated"}
    assert current(repo).state.flaky_tests == {FLAKY: 2}  # on a's candidate, and on the top


def test_a_base_whose_suite_fails_once_starts_its_lanes(tmp_path: Path, open_dir: Path) -> None:
    schedule = open_dir / "schedule"
    repo = _project(tmp_path / "r", schedule)
    schedule.write_text("F")
    run_pass(repo)
    stored = current(repo)
    assert stored.state.batch_state == "running"
    assert _states(repo) == {"a": "lane_admitted", "b": "lane_admitted"}
    assert stored.state.flaky_tests == {FLAKY: 1}


def test_a_broken_lane_is_parked_though_a_flaky_test_fails_beside_it(
    tmp_path: Path, open_dir: Path
) -> None:
    schedule = open_dir / "schedule"
    repo = _project(tmp_path / "r", schedule)
    run_pass(repo)
    work(repo, "a")
    work(repo, "b", {"b.txt": "b\n", "pkg/value.py": BROKEN})
    schedule.write_text("FP" * 30)  # the flaky test fails every other run
    for _ in range(3):
        run_pass(repo)
    states = current(repo).state.children
    assert {c.task_id: str(c.state) for c in states} == {"a": "integrated", "b": "needs_human"}
    (b,) = [child for child in states if child.task_id == "b"]
    assert b.reason is not None
    assert "batch_integration_check_failed" in b.reason


def test_a_culprits_reruns_run_its_failing_test_alone(tmp_path: Path, open_dir: Path) -> None:
    # every run of the whole suite leaves a mark: b's failing test is confirmed on runs of it
    # alone (ADR 0073), so the suite ran on the base, the top, its rerun and one probe only
    repo, _, marks = _marked_project(tmp_path, open_dir)
    work(repo, "a")
    work(repo, "b", {"b.txt": "b\n", "pkg/value.py": BROKEN})
    run_pass(repo)
    assert _states(repo) == {"a": "integrated", "b": "needs_human"}
    assert marks.read_text() == "x" * 4  # the base, the top twice, a's candidate


def test_a_test_the_config_lists_as_flaky_never_blocks_and_a_typo_is_warned(
    tmp_path: Path, open_dir: Path
) -> None:
    schedule = open_dir / "schedule"
    listed = (FLAKY, "tests/test_value.py::test_flaky_typo")
    repo = _project(tmp_path / "r", schedule, listed)
    schedule.write_text("F" * 40)
    log: list[str] = []
    run_pass(repo, log=log)
    assert any("flaky_tests in .github/imm.yml lists tests/test_value.py::test_flaky_typo" in line
               for line in log), log  # fmt: skip
    work(repo, "a")
    run_pass(repo)
    assert _states(repo)["a"] == "integrated"
    assert FLAKY in current(repo).state.flaky_tests
