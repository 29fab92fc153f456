"""`imm run`'s passes run no check: a lane-committed child waits until a background worker has
built and verified its candidate, and the pass after that lands it without running anything."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.local.verifying import BackgroundChecks, CheckSettings
from imm_action.masking import NO_MASK
from imm_action.passes.driver import reconcile
from imm_action.passes.observe import CandidateMemo
from imm_action.passes.request import PassResult
from imm_action.verify.result_cache import ResultCache
from tests.batch_helpers import current, make_project, open_local, run_pass, work
from tests.conftest import descriptor


def _quiet_pass(repo: Path, cache: ResultCache, memo: CandidateMemo) -> PassResult:
    batch_repo = open_local(repo)
    request = pass_request(batch_repo, "init", batch_id=None, admit=True)
    request = dataclasses.replace(request, verify=False)
    ports = pass_ports(batch_repo, lambda line: None, path_env=os.environ["PATH"], candidates=memo)
    return reconcile(request, ports, cache)


def _counting_check(counter: Path) -> str:
    return descriptor(["-c", f"open({str(counter)!r}, 'a').write('x')"])


def test_a_pass_without_checks_leaves_the_lane_waiting_and_lands_it_once_checked(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "runs"
    checks = dict.fromkeys("ab", _counting_check(counter))
    repo = make_project(tmp_path / "r", {"a": [], "b": []}, checks=checks)
    run_pass(repo)
    work(repo, "a")
    cache, memo = ResultCache(), CandidateMemo()

    waiting = _quiet_pass(repo, cache, memo)
    assert waiting.unverified == ("a",)
    assert waiting.integrated == ()
    assert not counter.exists()  # the pass ran nothing
    states = {c.task_id: str(c.state) for c in current(repo).state.children}
    assert states == {"a": "lane_committed", "b": "lane_admitted"}

    settings = CheckSettings(repo, os.environ["PATH"], None, NO_MASK)
    worker = BackgroundChecks(settings, cache, memo)
    assert waiting.head is not None
    worker.start(waiting.stored.state, waiting.head, {"a": ("a.txt",), "b": ("b.txt",)})
    deadline = time.monotonic() + 60
    while (verified := worker.collect()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert verified is True
    assert counter.read_text() == "x"

    landed = _quiet_pass(repo, cache, memo)
    assert landed.integrated == ("a",)
    assert landed.unverified == ()
    assert counter.read_text() == "x"  # nothing ran again
    stored = current(repo)
    assert any(entry.result.passed for entry in stored.cache.entries)  # kept with the state


def test_a_worker_stopped_midway_answers_nothing_and_writes_no_ref(tmp_path: Path) -> None:
    repo = make_project(
        tmp_path / "r", {"a": []}, checks={"a": descriptor(["-c", "import time; time.sleep(30)"])}
    )
    run_pass(repo)
    work(repo, "a")
    cache, memo = ResultCache(), CandidateMemo()
    waiting = _quiet_pass(repo, cache, memo)
    before = current(repo).commit
    checks = BackgroundChecks(CheckSettings(repo, os.environ["PATH"], None, NO_MASK), cache, memo)
    assert waiting.head is not None
    checks.start(waiting.stored.state, waiting.head, {"a": ("a.txt",)})
    assert checks.busy
    checks.stop()
    assert not checks.busy
    assert checks.collect() is None
    assert current(repo).commit == before
    assert cache.stored().entries == []


def test_a_check_failed_in_the_worker_parks_the_lane_in_the_next_pass(tmp_path: Path) -> None:
    failing = descriptor(["-c", "import sys; sys.exit(1)"])
    repo = make_project(tmp_path / "r", {"a": []}, checks={"a": failing})
    run_pass(repo)
    work(repo, "a")
    cache, memo = ResultCache(), CandidateMemo()
    waiting = _quiet_pass(repo, cache, memo)
    worker = BackgroundChecks(CheckSettings(repo, os.environ["PATH"], None, NO_MASK), cache, memo)
    assert waiting.head is not None
    worker.start(waiting.stored.state, waiting.head, {"a": ("a.txt",)})
    deadline = time.monotonic() + 60
    while (verified := worker.collect()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert verified is True
    assert worker.failures_seen  # a failure comes back too, though the state keeps only passes

    parked = _quiet_pass(repo, cache, memo)
    assert parked.unverified == ()
    child = current(repo).state.children[0]
    assert str(child.state) == "needs_human"
    assert child.reason is not None
    assert child.reason.startswith("batch_integration_check_failed: a:ok failed on candidate")


def _round(worker: BackgroundChecks, waiting: PassResult, scopes: dict[str, tuple[str]]) -> None:
    assert waiting.head is not None
    worker.start(waiting.stored.state, waiting.head, scopes)
    deadline = time.monotonic() + 60
    while (verified := worker.collect()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert verified is True


def test_a_round_verifies_the_whole_ready_stack_once_and_a_lane_ended_since_waits(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "runs"
    checks = {
        task: descriptor(["-c", f"open({str(counter)!r}, 'a').write({task!r})"]) for task in "abc"
    }
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": []}, checks=checks)
    run_pass(repo)
    work(repo, "a")
    work(repo, "b")
    cache, memo = ResultCache(), CandidateMemo()
    worker = BackgroundChecks(CheckSettings(repo, os.environ["PATH"], None, NO_MASK), cache, memo)
    scopes = {"a": ("a.txt",), "b": ("b.txt",), "c": ("c.txt",)}

    _round(worker, _quiet_pass(repo, cache, memo), scopes)
    # a's check and b's, once each, on the stack's top: not a's again on b's candidate
    assert sorted(counter.read_text()) == ["a", "b"]
    work(repo, "c")
    first = _quiet_pass(repo, cache, memo)
    assert first.integrated == ("a", "b")
    assert first.unverified == ("c",)

    _round(worker, first, scopes)
    assert _quiet_pass(repo, cache, memo).integrated == ("c",)
    assert sorted(counter.read_text()) == ["a", "a", "b", "b", "c"]
