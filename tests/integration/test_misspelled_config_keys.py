"""A misspelled config key is never silent (issue 44, ADR 0060): every command that reads the
config prints an unknown key at its file and line with the key it may misspell — `imm run`,
`imm reconcile` (and its job summary), `imm status`, as `imm check` and `imm plan` did — and a
key one edit away from a key that gates is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.model.config import GATING_KEYS, RepoConfig, meant_key, one_edit_apart
from tests.batch_helpers import make_project
from tests.conftest import as_github_step, git, run_cli
from tests.integration.test_local_run import EXECUTOR

WARNED = (
    ".github/imm.yml:2: warning: unknown setting 'max_paralel' is ignored; "
    "did you mean 'max_parallel'?"
)


def _project(tmp_path: Path, config: str) -> Path:
    return make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, repo: Path) -> tuple[int, str]:
    behaviour = tmp_path / "behaviour.json"
    behaviour.write_text("{}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMM_TEST_BEHAVIOUR", str(behaviour))
        code, out, err = run_cli(capsys, "run", "init", "--repo", str(repo), "--executor", EXECUTOR)
    return code, out + err


def test_imm_run_and_imm_status_print_an_unknown_key_at_its_line_with_what_it_may_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path, "qa_failure_limit: 2\nmax_paralel: 3\n")
    code, said = _run(capsys, tmp_path, repo)
    assert code == 0, said
    assert WARNED in said
    code, _, err = run_cli(capsys, "status", "init", "--repo", str(repo))
    assert code == 0
    assert WARNED in err


def test_the_integrate_jobs_summary_shows_the_configs_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _project(tmp_path, "qa_failure_limit: 2\nmax_paralel: 3\n")
    summary = as_github_step(monkeypatch, tmp_path)
    code, _, err = run_cli(capsys, "reconcile", "init", "--repo", str(repo))
    assert code == 0, err
    assert WARNED in err
    text = summary.read_text()
    assert "### Config warnings" in text
    assert "max_paralel" in text


@pytest.mark.parametrize(
    "typo",
    ["chek_network", "check_netwrok", "sanbox", "barrier_file", "branch_check", "held_check"],
)
def test_a_key_one_edit_from_a_gating_key_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], typo: str
) -> None:
    repo = _project(tmp_path, f"max_parallel: 2\n{typo}: false\n")
    refs_before = git(repo, "for-each-ref")
    code, said = _run(capsys, tmp_path, repo)
    assert code == 2, said
    assert f".github/imm.yml:2: '{typo}' is not a setting; did you mean" in said
    assert "so imm refuses it" in said
    assert git(repo, "for-each-ref") == refs_before  # nothing written
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code != 0
    assert f"'{typo}' is not a setting" in out + err


def test_every_gating_key_is_a_setting() -> None:
    assert set(RepoConfig.model_fields) >= GATING_KEYS


def test_a_likely_misspelling_gets_the_key_it_means() -> None:
    assert meant_key("max_paralel", RepoConfig.model_fields) == "max_parallel"
    assert meant_key("completely_else", RepoConfig.model_fields) is None


_WORDS = st.text(alphabet="abcdefghij_", min_size=2, max_size=12)


@given(_WORDS, st.data())
def test_one_insertion_deletion_substitution_or_swap_is_one_edit_apart(
    word: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(word) - 1))
    letter = data.draw(st.sampled_from("klmnop"))  # never a letter of the word's alphabet
    edits = [
        word[:at] + letter + word[at:],  # insertion
        word[:at] + word[at + 1 :],  # deletion
        word[:at] + letter + word[at + 1 :],  # substitution
    ]
    if at + 1 < len(word) and word[at] != word[at + 1]:
        edits.append(word[:at] + word[at + 1] + word[at] + word[at + 2 :])  # swap
    for edited in edits:
        assert one_edit_apart(word, edited), (word, edited)
        assert one_edit_apart(edited, word), (edited, word)
    assert not one_edit_apart(word, word)


def test_two_edits_are_not_one() -> None:
    assert not one_edit_apart("check_network", "chek_netwrk")
    assert not one_edit_apart("sandbox", "sandbox_expose")
