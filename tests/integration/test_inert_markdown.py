"""Names a lane chooses are never live Markdown (issue 62 #5): a lane writing a file named to
mention a user, close an issue, load an image, shout a verdict and hide the rest of the report
gets that name into the reasons imm shows — rendered by a CommonMark renderer with GitHub's
tables and raw HTML on (markdown-it-py), each view is searched for anything live outside code:
a mention, an issue reference, an image, emphasis, an HTML comment. The status comment is
also the pull request's body and the check run's summary (github/reporting.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from imm_action.actions.summary import lane_summary
from imm_action.github.reporting import status_comment
from imm_action.model.outcome import LaneOutcome
from imm_action.render import batch_markdown, job_summary
from imm_action.render.inert import inert, inert_cell
from tests.batch_helpers import current, make_project

HOSTILE = "@octocat fixes #1 <img src=x> **APPROVED by security** <!-- the rest hidden"
# An executor that does its task, and writes a file of that name outside its scope.
EXECUTOR = shlex.join([sys.executable, "-c", (
    "import os, pathlib; t = os.environ['IMM_TASK_ID']; pathlib.Path(t + '.txt').write_text(t); "
    f"pathlib.Path({HOSTILE!r}).write_text('x')"
)])  # fmt: skip
RENDERER = MarkdownIt("commonmark", {"html": True}).enable("table")


def live(markdown: str) -> list[str]:
    """What of the lane's name renders live: outside `<code>`, a mention, an issue reference
    (a closing keyword's target), an image, emphasis, a raw HTML comment."""
    rendered = RENDERER.render(markdown)
    outside = re.sub(r"<code>.*?</code>", "", rendered, flags=re.DOTALL)
    return [
        *re.findall(r"@octocat", outside),
        *re.findall(r"#1\b", outside),
        *re.findall(r"<img", outside),
        *re.findall(r"<(?:strong|em)>APPROVED", outside),
        *re.findall(r"<!-- the rest", outside),  # imm's own marker comment is no lane's
    ]


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`a` wrote the hostile name out of its scope and was parked for it."""
    repo = make_project(tmp_path_factory.mktemp("inert") / "r", {"a": [], "b": []})
    done = subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
         "--executor", EXECUTOR], capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    reasons = [child.reason or "" for child in current(repo).state.children]
    assert any(HOSTILE in reason for reason in reasons), reasons  # the premise: it is quoted
    return repo


def test_the_status_comment_pull_request_body_and_check_summary_show_nothing_live(
    parked: Path,
) -> None:
    stored = current(parked)
    assert stored.report is not None
    comment = status_comment(stored.report, stored.state, "https://github.com/o/r")
    assert "octocat" in comment  # shown, as text
    assert live(comment) == []


def test_the_job_summary_and_imm_status_markdown_show_nothing_live(parked: Path) -> None:
    stored = current(parked)
    assert stored.report is not None
    assert live(job_summary(stored.report, stored.state, "https://github.com/o/r")) == []
    assert live(batch_markdown(stored.report, stored.state)) == []


def test_a_lane_jobs_summary_shows_nothing_live() -> None:
    outcome = LaneOutcome.model_validate({
        "contract": "imm_action/lane_outcome/v1", "batch_id": "batch-init-1", "task_id": "a",
        "attempt": 1, "findings": [], "state": "needs_human", "lane_commit": None,
        "reason": f"dirty_outside_scope: {HOSTILE}", "qa_failures": 0,
    })  # fmt: skip
    assert live(lane_summary(outcome)) == []


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE,
        "a`b` @x `` c `` #2 www.evil.example http://x.example/y",
        "`unclosed @x",
        "_emph_ *also* [link](http://x) ![img](http://x) ~~gone~~ <b>bold</b> &amp;",
    ],
)
def test_inert_text_renders_as_itself_with_nothing_live(text: str) -> None:
    rendered = RENDERER.render(inert(text))
    assert not re.search(r"<(?!/?(p|code)>)", rendered), rendered  # no tag but p and code
    cell = RENDERER.render(f"| h |\n|---|\n| {inert_cell(text)} |\n")
    assert not re.search(r"<(?!/?(p|code|table|thead|tbody|tr|th|td)>)", cell), cell
    assert live(inert(text).replace("@x", "@octocat").replace("#2", "#1")) == []
