"""The descriptors a candidate must pass are read from its own intent files, each intent blob
parsed once however many candidates of a chain carry it."""

from __future__ import annotations

import json
from pathlib import Path

from imm_action.git.repo import GitRepo
from imm_action.integrate.facts import ChecksFound, ChecksMissing
from imm_action.model.intent import intent_path
from imm_action.passes.intent_checks import IntentMemo, candidate_checks
from tests.batch_helpers import make_project
from tests.conftest import descriptor, git, intent


def _checks(repo: Path, memo: IntentMemo) -> ChecksFound | ChecksMissing:
    head = git(repo, "rev-parse", "HEAD").strip()
    return candidate_checks(GitRepo(repo), head, task_id="a", below=[], intents=memo)


def test_a_candidates_intent_is_parsed_once_and_found_again_by_its_blob(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    memo: IntentMemo = {}
    first = _checks(repo, memo)
    assert isinstance(first, ChecksFound)
    blob = git(repo, "rev-parse", f"HEAD:{intent_path('a')}").strip()
    assert list(memo) == [("a", blob)]
    memo[("a", blob)] = ChecksMissing("a", "unreadable", "kept from before")
    assert _checks(repo, memo) == ChecksMissing("a", "unreadable", "kept from before")


def test_an_intent_changed_in_the_candidate_is_read_again(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {"a": []})
    memo: IntentMemo = {}
    _checks(repo, memo)
    acceptance = [{"id": "new", "assertion": "Still works.", "verification": descriptor()}]
    (repo / intent_path("a")).write_text(json.dumps(intent("a", acceptance=acceptance)))
    git(repo, "commit", "-qam", "another acceptance item")
    found = _checks(repo, memo)
    assert isinstance(found, ChecksFound)
    assert [check.check_id for check in found.checks] == ["a:new"]
    assert len(memo) == 2
