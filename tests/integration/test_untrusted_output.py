"""What a lane prints, and the name it commits under, are untrusted: bounded and cleaned before
anything stores, prints or reports them (issue 21 #4; threat model rows 33-34)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from imm_action.model.outcome import OUTCOME_MAX_BYTES
from imm_action.model.state import ChildState
from tests.batch_helpers import current, make_project
from tests.conftest import git, run_cli
from tests.integration.test_local_run import EXECUTOR
from tests.lane_executor import BIDI

ESC = "\x1b"


def run_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behaviours: dict[str, str]
) -> tuple[Path, int, str, str]:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text(json.dumps(behaviours))
    repo = make_project(tmp_path / "r", {task: [] for task in behaviours})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    return repo, code, out, err


def outcome_texts(repo: Path) -> list[str]:
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/imm/lanes").split()
    return [git(repo, "show", f"{ref}:outcome.json") for ref in refs]


def _bidi_in(text: str) -> bool:
    """A bidirectional control or zero-width character, raw or as a JSON escape."""
    return bool(set(BIDI) & set(text)) or any(
        f"\\u{ord(char):04x}" in text.lower() for char in BIDI
    )


def test_a_lane_flooding_one_line_leaves_a_small_clean_outcome_and_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, code, out, err = run_with(tmp_path, capsys, {"a": "flood:20"})
    assert code == 1
    state = current(repo)
    child = state.state.children[0]
    assert child.state is ChildState.NEEDS_HUMAN
    listing = git(repo, "ls-tree", "-r", "-l", state.commit).splitlines()
    assert sum(int(line.split()[3]) for line in listing) < 256 * 1024
    found = subprocess.run(
        ["git", "grep", "-l", "-e", ESC, state.commit], cwd=repo, capture_output=True, check=False
    )
    assert found.returncode == 1  # nothing matched
    for text in outcome_texts(repo):
        assert len(text.encode()) <= OUTCOME_MAX_BYTES
        assert ESC not in text
        assert not _bidi_in(text), text[:300]
    assert ESC not in out + err
    assert not _bidi_in(out + err)
    assert "<U+202E>" in out + err  # written out where it was, not dropped unseen
    assert "bytes cut]" in out + err
    assert len(out + err) < 64 * 1024


def test_an_executors_author_name_lands_without_escapes_or_a_forged_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, code, _, err = run_with(tmp_path, capsys, {"a": "author"})
    assert code == 0, err
    author = git(repo, "log", "-1", "--format=%an|%ae", "imm/init").strip()
    assert ESC not in author
    assert "\x07" not in author
    assert not set(BIDI) & set(author), author
    name, email = author.split("|")
    assert "<" not in name
    assert name.startswith("Alice")
    assert email == "alice@example.com"


@pytest.mark.parametrize(
    "shape",
    ["lines:200000", "binary:4"],
    ids=["a million short lines", "4 MB of binary noise"],
)
def test_other_flood_shapes_leave_a_small_clean_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    repo, code, out, err = run_with(tmp_path, capsys, {"a": f"flood-{shape}"})
    assert code == 1
    for text in outcome_texts(repo):
        assert len(text.encode()) <= OUTCOME_MAX_BYTES
        assert ESC not in text
        assert "\\u0000" not in text
    assert ESC not in out + err
    assert len(out + err) < 64 * 1024
