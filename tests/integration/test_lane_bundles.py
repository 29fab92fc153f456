"""A lane job's outcome as a git bundle (`imm lane --phase bundle`, no token), imported by the
integrator (`imm reconcile --lane-bundles DIR`) as untrusted input: only an admitted lane's own
outcome ref and lane branch, checked like a publish, are pushed; a forged bundle moves nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from imm_action.lanes.handoff import handoff_path
from imm_action.model.refs import lane_outcome_ref
from tests.batch_helpers import make_project, run_pass
from tests.conftest import git, run_cli

EXECUTOR = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'lane_executor.py'}"
BRANCH_A = "refs/heads/imm-lane/init/a"


class LaneJob:
    """A remote with admitted lanes `a` and `b`, the integrator's clone (`project`) and a lane
    job's fresh clone (`job`) that has run lane `a`'s fetch and work steps."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.project = make_project(tmp_path / "project", {"a": [], "b": []})
        self.remote = tmp_path / "remote.git"
        git(tmp_path, "clone", "-q", "--bare", str(self.project), str(self.remote))
        git(self.project, "remote", "add", "origin", str(self.remote))
        self.batch = run_pass(self.project, remote="origin").stored.state.batch_id
        self.job = tmp_path / "job"
        git(tmp_path, "clone", "-q", str(self.remote), str(self.job))
        self.bundles = tmp_path / "bundles"
        for phase in ("fetch", "work"):
            assert self.lane(phase) == 0

    def lane(self, phase: str, *extra: str, task: str = "a") -> int:
        argv = ["lane", "--repo", str(self.job), "--remote", "origin", "--batch-id", self.batch]
        log = str(self.job.parent / "lane.log")
        code, _, _ = run_cli(
            self.capsys, *argv, "--task", task, "--executor", EXECUTOR, "--phase", phase,
            "--log", log, *extra,
        )  # fmt: skip
        return code

    def handed_off(self) -> dict[str, str]:
        git_dir = Path(git(self.job, "rev-parse", "--absolute-git-dir").strip())
        data = json.loads(handoff_path(git_dir, self.batch, "a").read_text())
        return {item["ref"]: item["new"] for item in data}

    def forge(self, name: str, refs: dict[str, str]) -> None:
        """A bundle of `refs` (name → commit), made as a hostile executor could."""
        base = git(self.job, "rev-parse", "HEAD").strip()
        for ref, oid in refs.items():
            git(self.job, "update-ref", ref, oid)
        target = self.bundles / name / "lane.bundle"
        target.parent.mkdir(parents=True)
        git(self.job, "bundle", "create", "-q", str(target), *refs, f"^{base}")
        assert sorted(git(self.job, "bundle", "list-heads", str(target)).split()[1::2]) == sorted(
            refs
        )

    def new_commit(self) -> str:
        """A commit no lane made, on the lane base."""
        tree = git(self.job, "rev-parse", "HEAD^{tree}").strip()
        return git(self.job, "commit-tree", tree, "-p", "HEAD", "-m", "not the lane's").strip()

    def reconcile(self) -> str:
        code, _, err = run_cli(
            self.capsys, "reconcile", "init", "--repo", str(self.project), "--remote", "origin",
            "--batch-id", self.batch, "--lane-bundles", str(self.bundles),
        )  # fmt: skip
        assert code == 0, err
        return err

    def remote_refs(self) -> str:
        return git(self.remote, "for-each-ref", "--format=%(objectname) %(refname)")


@pytest.fixture
def lane_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> LaneJob:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps({"a": "ok", "b": "ok"}))
    monkeypatch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
    return LaneJob(tmp_path, capsys)


def test_a_bundled_outcome_reaches_the_remote_only_through_the_integrator_and_lands(
    lane_job: LaneJob,
) -> None:
    bundle = lane_job.bundles / "imm-lane-a" / "a.bundle"
    assert lane_job.lane("bundle", "--bundle", str(bundle)) == 0
    outcome_ref = lane_outcome_ref(lane_job.batch, "a")
    assert outcome_ref not in lane_job.remote_refs()
    heads = git(lane_job.job, "bundle", "list-heads", str(bundle)).split()
    assert sorted(heads[1::2]) == sorted(lane_job.handed_off()) == sorted([outcome_ref, BRANCH_A])
    err = lane_job.reconcile()
    assert "(a): imported: its outcome of attempt 0 (settled) is pushed" in err
    log = git(lane_job.remote, "log", "--format=%s", "refs/heads/imm/init")
    assert "imm(a)" in log


def test_the_bundle_phase_refuses_without_a_hand_off(
    tmp_path: Path, lane_job: LaneJob, capsys: pytest.CaptureFixture[str]
) -> None:
    git_dir = Path(git(lane_job.job, "rev-parse", "--absolute-git-dir").strip())
    handoff_path(git_dir, lane_job.batch, "a").unlink()
    bundle = tmp_path / "none.bundle"
    assert lane_job.lane("bundle", "--bundle", str(bundle)) == 2
    assert not bundle.exists()


def test_a_bundle_carrying_another_tasks_outcome_is_ignored(lane_job: LaneJob) -> None:
    outcome = lane_job.handed_off()[lane_outcome_ref(lane_job.batch, "a")]
    before = lane_job.remote_refs()
    lane_job.forge("imm-lane-b", {lane_outcome_ref(lane_job.batch, "b"): outcome})
    err = lane_job.reconcile()
    assert "ignored: lane b: the hand-off's outcome is not this lane's" in err
    assert lane_outcome_ref(lane_job.batch, "b") not in lane_job.remote_refs()
    assert lane_outcome_ref(lane_job.batch, "b") not in before


def test_a_bundle_whose_lane_branch_is_not_the_outcomes_lane_commit_is_ignored(
    lane_job: LaneJob,
) -> None:
    moves = lane_job.handed_off()
    outcome_ref = lane_outcome_ref(lane_job.batch, "a")
    elsewhere = lane_job.new_commit()
    lane_job.forge("imm-lane-a", {outcome_ref: moves[outcome_ref], BRANCH_A: elsewhere})
    err = lane_job.reconcile()
    assert "ignored: lane a: the hand-off moves the lane branch elsewhere" in err
    refs = lane_job.remote_refs()
    assert outcome_ref not in refs
    assert BRANCH_A not in refs


def test_a_bundle_with_a_ref_beyond_the_lanes_two_moves_nothing(lane_job: LaneJob) -> None:
    moves = lane_job.handed_off()
    main_before = git(lane_job.remote, "rev-parse", "refs/heads/main")
    lane_job.forge("imm-lane-a", {**moves, "refs/heads/main": lane_job.new_commit()})
    err = lane_job.reconcile()
    assert "ignored: lane a: names a ref it may not move: refs/heads/main" in err
    assert git(lane_job.remote, "rev-parse", "refs/heads/main") == main_before
    assert lane_outcome_ref(lane_job.batch, "a") not in lane_job.remote_refs()


def test_a_file_that_is_not_a_bundle_is_ignored_and_the_pass_still_runs(
    lane_job: LaneJob,
) -> None:
    junk = lane_job.bundles / "imm-lane-x" / "lane.bundle"
    junk.parent.mkdir(parents=True)
    junk.write_text("# v2 git bundle\nnot really\n")
    err = lane_job.reconcile()
    assert "(no task): ignored: not a git bundle (no pack after its header)" in err


def test_an_ignored_bundle_is_listed_in_the_job_summary(
    lane_job: LaneJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)
    moves = lane_job.handed_off()
    lane_job.forge("imm-lane-`b`", {**moves, "refs/heads/main": lane_job.new_commit()})
    lane_job.reconcile()
    text = summary.read_text()
    assert "### Lane bundles" in text
    assert (
        "- `a` `imm-lane-'b'/lane.bundle`: **ignored**: lane a: names a ref it may not move: "
        "refs/heads/main" in text
    )


def _packs(repo: Path) -> int:
    return len(list((repo / ".git" / "objects" / "pack").glob("*.pack")))


def test_a_bundle_of_fewer_than_a_hundred_objects_is_imported_without_a_pack(
    lane_job: LaneJob,
) -> None:
    """As receive-pack does (`transfer.unpackLimit`): every git process of the pass opens every
    pack, so one pack per lane made each `merge-tree` of a 256-lane stack four times slower."""
    assert lane_job.lane("bundle", "--bundle", str(lane_job.bundles / "a" / "a.bundle")) == 0
    before = _packs(lane_job.project)
    assert "(a): imported" in lane_job.reconcile()
    assert _packs(lane_job.project) == before


def test_a_bundle_of_a_hundred_objects_or_more_is_indexed_as_one_pack(lane_job: LaneJob) -> None:
    job = lane_job.job
    for index in range(120):
        (job / f"many-{index}.txt").write_text(f"{index}\n")
    git(job, "add", "-A")
    tree = git(job, "write-tree").strip()
    many = git(job, "commit-tree", tree, "-p", "HEAD", "-m", "120 new files").strip()
    lane_job.forge("imm-lane-a", {lane_outcome_ref(lane_job.batch, "a"): many})
    before = _packs(lane_job.project)
    lane_job.reconcile()
    assert _packs(lane_job.project) == before + 1
    assert git(lane_job.project, "cat-file", "-t", many).strip() == "commit"


def test_a_damaged_bundle_is_refused_alone_and_an_intact_one_beside_it_lands(
    lane_job: LaneJob,
) -> None:
    """What `digest-mismatch: warn` on the download relies on (ADR 0043): an artifact damaged
    in transit reaches the integrator, which refuses it by git's own checks, and nothing else
    is held back by it."""
    intact = lane_job.bundles / "imm-lane-a" / "a.bundle"
    assert lane_job.lane("bundle", "--bundle", str(intact)) == 0
    data = bytearray(intact.read_bytes())
    middle = len(data) - 40  # inside the pack, before its trailing checksum
    data[middle] ^= 0xFF
    damaged = lane_job.bundles / "imm-lane-a-copy" / "a.bundle"
    damaged.parent.mkdir()
    damaged.write_bytes(bytes(data))
    err = lane_job.reconcile()
    assert "'imm-lane-a-copy/a.bundle' (a): ignored: git unpack-objects" in err
    assert "(a): imported: its outcome of attempt 0 (settled) is pushed" in err
    assert "imm(a)" in git(lane_job.remote, "log", "--format=%s", "refs/heads/imm/init")


def _recording_receives(remote: Path, refuse: str | None = None) -> Path:
    """A pre-receive hook on the remote writing one line per push (the refs it sets, deletions
    left out), and refusing any push that moves `refuse`."""
    record = remote.parent / "receives"
    hook = remote / "hooks" / "pre-receive"
    refusal = f'grep -q " {refuse}$" "$pushed" && echo refused >&2 && exit 1\n' if refuse else ""
    hook.write_text(
        f'#!/bin/sh\npushed=$(mktemp -p "{remote.parent}")\ncat > "$pushed"\n'  # not in /tmp
        f"awk '$2 !~ /^0+$/ {{print $3}}' \"$pushed\" | tr '\\n' ' ' >> {record}\n"
        f"echo >> {record}\n{refusal}exit 0\n"
    )
    hook.chmod(0o755)
    return record


def _bundle_both(lane_job: LaneJob) -> None:
    for phase in ("fetch", "work"):
        assert lane_job.lane(phase, task="b") == 0
    for task in ("a", "b"):
        bundle = lane_job.bundles / f"imm-lane-{task}" / f"{task}.bundle"
        assert lane_job.lane("bundle", "--bundle", str(bundle), task=task) == 0


def test_every_bundle_of_a_pass_reaches_the_remote_in_one_atomic_push(lane_job: LaneJob) -> None:
    _bundle_both(lane_job)
    record = _recording_receives(lane_job.remote)
    err = lane_job.reconcile()
    assert err.count("imported: its outcome of attempt 0 (settled) is pushed") == 2
    outcome = lane_outcome_ref(lane_job.batch, "")
    with_outcomes = [line.split() for line in record.read_text().splitlines() if outcome in line]
    assert [sorted(refs) for refs in with_outcomes] == [
        sorted([f"{outcome}a", f"{outcome}b", BRANCH_A, "refs/heads/imm-lane/init/b"])
    ]


def test_a_bundle_the_remote_refuses_costs_no_other_bundle_its_import(lane_job: LaneJob) -> None:
    _bundle_both(lane_job)
    _recording_receives(lane_job.remote, refuse=lane_outcome_ref(lane_job.batch, "a"))
    err = lane_job.reconcile()
    assert "(a): ignored: the push was refused" in err
    assert "(b): imported: its outcome of attempt 0 (settled) is pushed" in err
    log = git(lane_job.remote, "log", "--format=%s", "refs/heads/imm/init")
    assert "imm(b)" in log
    assert "imm(a)" not in log
