"""Every text a person reads about a stopped batch is part of the interface: the local summary
(`imm run`'s last words, and `imm status`), `imm status --format markdown`, the status comment
and the job summary are checked against golden files. One renderer feeds them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.github.reporting import status_comment
from imm_action.model.outcome import Failure
from imm_action.model.report import BatchRunReport
from imm_action.model.state import BatchRunState
from imm_action.render import batch_markdown, batch_text, job_summary, local_commands
from tests.batch_helpers import current, make_project, publish, run_pass, work
from tests.conftest import assert_golden

REPOSITORY_URL = "https://github.example/acme/shop"
WHERE = Path("/home/me/shop")  # where the person's repository is, as the commands name it
PROGRAM = "/home/me/.venv/bin/imm"

CHECK_FAILED = Failure(
    step="b:ok",
    command="python3 -m unittest -q tests.test_b",
    exit_code=1,
    output_tail="F\nFAIL: test_total (tests.test_b.CartTest)\nAssertionError: 1200 != 1320",
)
TIMED_OUT = Failure(
    step="executor", command="agent --task d", exit_code=None, timeout_s=1800.0, output_tail=""
)


@pytest.fixture
def stopped(tmp_path: Path) -> tuple[BatchRunReport, BatchRunState]:
    """a integrated; b parked by its check (failed on both attempts); c skipped behind b; d
    parked by an executor that timed out."""
    repo = make_project(tmp_path / "r", {"a": [], "b": [], "c": ["b"], "d": []})
    run_pass(repo)
    work(repo, "a")
    publish(repo, "b", None, state="needs_human", reason="QA failure limit reached",
            failures=[CHECK_FAILED], qa_failures=2)  # fmt: skip
    publish(repo, "d", None, state="needs_human", reason="executor timed out after 1800 s",
            failures=[TIMED_OUT])  # fmt: skip
    run_pass(repo)
    stored = current(repo)
    assert stored.report is not None
    return stored.report, stored.state


def test_the_local_summary_of_a_stopped_batch(
    stopped: tuple[BatchRunReport, BatchRunState],
) -> None:
    report, _ = stopped
    assert_golden("stopped_summary.txt", batch_text(report, program=PROGRAM, repo=WHERE) + "\n")


def test_the_status_markdown_of_a_stopped_batch(
    stopped: tuple[BatchRunReport, BatchRunState],
) -> None:
    report, state = stopped
    text = batch_markdown(report, state, local_commands(report, PROGRAM, WHERE))
    assert_golden("stopped_status.md", text)


def test_the_status_comment_of_a_stopped_batch(
    stopped: tuple[BatchRunReport, BatchRunState],
) -> None:
    report, state = stopped
    assert_golden("stopped_status_comment.md", status_comment(report, state, REPOSITORY_URL))


def test_the_job_summary_of_a_stopped_batch(stopped: tuple[BatchRunReport, BatchRunState]) -> None:
    report, state = stopped
    assert_golden("stopped_job_summary.md", job_summary(report, state, REPOSITORY_URL))


def test_the_lane_job_summary_of_a_parked_lane() -> None:
    from imm_action.actions.summary import lane_summary
    from imm_action.model.outcome import OUTCOME_CONTRACT, LaneOutcome

    outcome = LaneOutcome(
        contract=OUTCOME_CONTRACT, batch_id="batch-init-0", task_id="b", attempt=0,
        state="needs_human", reason="QA failure limit reached", qa_failures=2, findings=[],
        lane_commit=None, failures=[CHECK_FAILED],
    )  # fmt: skip
    assert_golden("stopped_lane_job_summary.md", lane_summary(outcome))
