"""A stack's checks are pulled by the verifier's workers from one shared queue, longest first
(issue 31): no check waits behind a busy worker while another worker is free."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CachedCheck, CheckCache, CheckResult
from imm_action.verify.check_queue import (
    Admission,
    IdleCores,
    QueuedCheck,
    Workers,
    default_workers,
    longest_first,
)
from imm_action.verify.checks import Check, TreeJob, Verifier
from imm_action.verify.result_cache import ResultCache
from tests.conftest import git, make_repo


def _logging_check(task: str, log: Path, seconds: float) -> Check:
    """A check that writes when it starts and ends to `log`, sleeping `seconds` between."""
    code = (
        "import sys, time; log = open(sys.argv[1], 'a');"
        f"log.write('start {task} %f\\n' % time.time()); log.flush();"
        f"time.sleep({seconds}); log.write('end {task} %f\\n' % time.time())"
    )
    body = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": ["-c", code, str(log)]},
    }
    return Check(f"{task}:ok", parse_descriptor(json.dumps(body)))


def _spans(log: Path) -> dict[str, tuple[float, float]]:
    starts: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        what, task, at = line.split()
        if what == "start":
            starts[task] = float(at)
        else:
            spans[task] = (starts[task], float(at))
    return spans


def _order(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[GitRepo, str]:
    repo = make_repo(tmp_path / "r", {"src/app.py": "print('hi')\n"})
    return GitRepo(repo), git(repo, "rev-parse", "HEAD^{tree}").strip()


def test_a_free_worker_takes_the_next_check_whatever_its_position(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    """Long, short, long, short on two workers: split by position, both long checks fell to
    one worker and ran one after the other; pulled from one queue, they overlap."""
    repo, oid = tree
    log = tmp_path / "log"
    checks = [
        _logging_check("long1", log, 2.0),
        _logging_check("short1", log, 0.0),
        _logging_check("long2", log, 2.0),
        _logging_check("short2", log, 0.0),
    ]
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=2)
    results = verifier.verify_queued([TreeJob(oid, tuple(checks))])
    assert all(result.passed for result in results[0])
    spans = _spans(log)
    assert spans["long2"][0] < spans["long1"][1]  # the second long check did not wait


def test_checks_run_longest_first_by_their_recorded_durations(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    repo, oid = tree
    log = tmp_path / "log"
    checks = [_logging_check(task, log, 0.0) for task in ("quick", "slow", "middling")]
    recorded = {"quick": 100, "slow": 90_000, "middling": 4_000}
    on_an_older_tree = CheckCache(
        entries=[
            CachedCheck(
                tree="0" * 40,
                descriptor_digest=check.digest,
                result=CheckResult(
                    check_id=check.check_id,
                    passed=True,
                    exit_code=0,
                    timed_out=False,
                    duration_ms=recorded[check.check_id.split(":")[0]],
                    output_tail="",
                    output_limited=False,
                    changed_outside=[],
                ),
            )
            for check in checks
        ]
    )
    verifier = Verifier(repo, ResultCache(on_an_older_tree), path_env=os.environ["PATH"], workers=1)
    verifier.verify_queued([TreeJob(oid, tuple(checks))])
    assert _order(log) == ["slow", "middling", "quick"]


def test_a_check_never_timed_goes_before_those_with_a_recorded_duration() -> None:
    durations = {"a": 5, "b": None, "c": 50, "d": None}
    items = [QueuedCheck("tree", name) for name in durations]  # type: ignore[arg-type]
    ordered = longest_first(items, lambda item: durations[str(item.check)])
    assert [item.check for item in ordered] == ["b", "d", "c", "a"]


def test_by_default_one_check_per_core_runs_and_up_to_four_per_core_while_cores_idle() -> None:
    assert default_workers(2) == Workers(2, 8)
    assert default_workers(4) == Workers(4, 16)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_checks_up_to_the_floor_start_whatever_the_cores_do() -> None:
    admission = Admission(Workers(2, 8), idle=lambda: 0.0, clock=_Clock())
    assert [admission.try_enter() for _ in range(3)] == [True, True, False]


def test_beyond_the_floor_a_check_starts_only_while_a_core_is_idle() -> None:
    idle = [0.3]
    clock = _Clock()
    admission = Admission(Workers(1, 8), idle=lambda: idle[0], clock=clock)
    assert admission.try_enter()
    clock.now = 1.0
    assert not admission.try_enter()  # the cores are busy: computing checks fill them
    clock.now = 2.0
    idle[0] = 1.6
    assert admission.try_enter()  # checks that wait leave cores idle: more start
    assert admission.allowed == 3  # one more per idle core


def test_more_checks_are_let_in_at_most_once_per_ramp_and_never_beyond_the_ceiling() -> None:
    clock = _Clock()
    admission = Admission(Workers(1, 3), idle=lambda: 1.0, ramp=0.2, clock=clock)
    assert admission.try_enter()
    assert admission.try_enter()
    assert not admission.try_enter()  # the idle figure has not yet seen the last one start
    clock.now = 0.5
    assert admission.try_enter()
    clock.now = 1.0
    assert not admission.try_enter()  # the ceiling
    admission.leave()
    assert admission.try_enter()


def test_no_more_workers_join_than_checks_wait_for_them() -> None:
    """A worker's first check costs it a checkout of the tree: only a queue as long as the
    workers running pays for another (a big repository's few checks stay on the floor)."""
    waiting = [1]
    clock = _Clock()
    admission = Admission(Workers(2, 8), idle=lambda: 2.0, clock=clock, waiting=lambda: waiting[0])
    assert admission.try_enter()
    assert admission.try_enter()
    clock.now = 1.0
    assert not admission.try_enter()  # one waits, two run
    waiting[0] = 6
    clock.now = 2.0
    assert admission.try_enter()


def test_when_the_cores_fill_up_fewer_checks_are_let_in_down_to_the_floor() -> None:
    idle = [2.0]
    clock = _Clock()
    admission = Admission(Workers(1, 8), idle=lambda: idle[0], ramp=0.2, clock=clock)
    for step in range(3):
        clock.now = step * 1.0
        assert admission.try_enter()
    assert admission.allowed == 3
    idle[0] = 0.0
    for step in range(3, 10):
        clock.now = step * 1.0
        admission.try_enter()
    assert admission.allowed == 1


def test_idle_cores_are_read_from_proc_stat_between_two_samples(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")
    idle = IdleCores(period=0.0, stat=stat)
    assert idle() == 0.0  # one sample: nothing known yet
    stat.write_text("cpu  150 0 150 900 0 0 0 0 0 0\ncpu0 1\ncpu1 1\n")  # 100 of 200 idle
    assert idle() == pytest.approx(0.5 * 2)


def test_without_proc_stat_no_core_counts_as_idle(tmp_path: Path) -> None:
    assert IdleCores(period=0.0, stat=tmp_path / "missing")() == 0.0


def test_checks_of_several_trees_share_the_queue_and_each_runs_once_per_tree(
    tree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    repo, first = tree
    (repo.path / "more").write_text("x")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "more")
    second = git(repo.path, "rev-parse", "HEAD^{tree}").strip()
    log = tmp_path / "log"
    one, two = _logging_check("one", log, 0.0), _logging_check("two", log, 0.0)
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=3)
    results = verifier.verify_queued(
        [TreeJob(first, (one, two)), TreeJob(second, (two,)), TreeJob(first, (one,))]
    )
    assert [[r.check_id for r in found] for found in results] == [
        ["one:ok", "two:ok"], ["two:ok"], ["one:ok"]
    ]  # fmt: skip
    assert sorted(_order(log)) == ["one", "two", "two"]
    assert verifier.runs == 3
