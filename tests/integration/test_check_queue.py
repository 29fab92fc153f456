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
from imm_action.verify.check_queue import QueuedCheck, default_workers, longest_first
from imm_action.verify.checks import Check, ResultCache, TreeJob, Verifier
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


def test_the_default_workers_are_two_more_than_the_cores() -> None:
    assert default_workers(2) == 4
    assert default_workers(4) == 6


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
