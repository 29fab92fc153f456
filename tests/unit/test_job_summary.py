"""The integrate job's summary links each lane in flight to where its log is."""

from __future__ import annotations

from imm_action.actions.summary import pass_summary
from imm_action.integrate import transitions as t
from imm_action.integrate.verdict import build_report, verdict
from imm_action.model.state import BatchRunState
from tests.unit.test_decide import NOW, admitted

REPO_URL = "https://github.com/acme/shop"


def _summary(state: BatchRunState) -> str:
    return pass_summary(build_report(state, verdict(state, []), NOW), state, REPO_URL)


def test_a_lane_whose_job_was_found_links_to_its_job() -> None:
    job_url = f"{REPO_URL}/actions/runs/7/job/70"
    state = t.record_job(admitted("a", on_github=True), "a", 70, "imm lane a", job_url)
    assert f"- `a`: [imm lane a]({job_url})" in _summary(state)


def test_a_lane_whose_job_is_not_found_yet_links_to_its_run() -> None:
    state = admitted("a", on_github=True)
    assert f"- `a`: [imm lane a]({REPO_URL}/actions/runs/7)" in _summary(state)
