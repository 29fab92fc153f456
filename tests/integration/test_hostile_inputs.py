"""Hostile input files (issue 12): each is refused with exit 2 and one message naming the file,
and nothing is written anywhere."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import initiative_files, intent, make_repo, run_cli, snapshot

TASKS: dict[str, list[str]] = {"a": [], "b": ["a"]}
CONFIG = ".github/imm.yml"
LEVELS = "abcdefghi"
# nine levels of nine aliases each: 9**9 (387 million) strings once expanded, 400 bytes written
ALIAS_BOMB = "\n".join(
    [
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"{name}: &{name} [{', '.join(['*' + below] * 9)}]"
            for below, name in itertools.pairwise(LEVELS)
        ),
        "max_parallel: 2",
    ]
)


def _repo(tmp_path: Path, extra: dict[str, str | bytes] | None = None) -> Path:
    files = initiative_files("init", TASKS)
    files.update(extra or {})
    return make_repo(tmp_path / "r", files)


def _refused(
    capsys: pytest.CaptureFixture[str], repo: Path, *argv: str
) -> tuple[str, dict[str, bytes]]:
    """Run `imm <argv>` and prove it exited 2 and wrote nothing; its stdout+stderr."""
    before = snapshot(repo)
    code, out, err = run_cli(capsys, *argv, "--repo", str(repo))
    assert code == 2, (out, err)
    assert "Traceback" not in err
    after = snapshot(repo)
    assert after == before
    return out + err, after


@pytest.mark.parametrize("command", [("check",), ("plan", "init"), ("run", "init")])
def test_a_config_symlinked_out_of_the_repository_is_refused_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    secret = tmp_path / "secret.yml"
    secret.write_text("max_parallel: 3  # the-secret-content\n")
    repo = _repo(tmp_path)
    (repo / ".github").mkdir()
    os.symlink(secret, repo / CONFIG)
    text, _ = _refused(capsys, repo, *command)
    assert f"{CONFIG}: must be a regular file in the repository" in text
    assert "the-secret-content" not in text


def test_a_config_reached_through_a_symlinked_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "imm.yml").write_text("max_parallel: 3\n")
    repo = _repo(tmp_path)
    os.symlink(elsewhere, repo / ".github")
    text, _ = _refused(capsys, repo, "check")
    assert ".github is a symbolic link" in text


def test_a_config_over_256_kib_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, {CONFIG: "# " + "x" * (256 * 1024) + "\n"})
    text, _ = _refused(capsys, repo, "check")
    assert f"{CONFIG}: is 262147 bytes; at most 256 KiB are allowed" in text


def test_a_binary_config_gets_one_line_and_never_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, {CONFIG: b"\x7fELF\x02\x01\x01\x00\x00BINARYPAYLOAD\xff\xfe"})
    text, _ = _refused(capsys, repo, "check")
    assert f"{CONFIG}: is not a text file (binary content)\n" in text
    assert "BINARYPAYLOAD" not in text


def test_a_config_with_a_duplicate_key_is_refused_at_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, {CONFIG: "max_parallel: 2\nexecutor: x\nmax_parallel: 9\n"})
    text, _ = _refused(capsys, repo, "check")
    assert f'{CONFIG}:3: duplicate key "max_parallel"' in text


def test_an_alias_bomb_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, {CONFIG: ALIAS_BOMB})
    text, _ = _refused(capsys, repo, "check")
    assert f"{CONFIG}: aliases expand it to more than 10000 values" in text


def test_a_config_with_a_few_aliases_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = "barrier_files: &locks [package-lock.json]\nexecutor: x\nmax_parallel: 2\n"
    repo = _repo(tmp_path, {CONFIG: config})
    code, _, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 0, err


@pytest.mark.parametrize("content", ["big", "bomb"])
def test_a_five_megabyte_or_alias_bomb_config_is_refused_in_a_process_under_100_mb(
    tmp_path: Path, content: str
) -> None:
    """The refusal never reads or expands the file: the whole `imm check` stays small."""
    data = "# " + "x" * (5 * 1024 * 1024) + "\n" if content == "big" else ALIAS_BOMB
    repo = _repo(tmp_path, {CONFIG: data})
    probe = (
        "import resource, subprocess, sys;"
        "done = subprocess.run(sys.argv[1:], capture_output=True);"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
        "print(done.returncode, peak)"
    )
    argv = [sys.executable, "-m", "imm_action", "check", "--repo", str(repo)]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], check=True, capture_output=True, text=True, timeout=60
    )
    code, peak_kib = map(int, done.stdout.split())
    assert code == 2
    assert peak_kib < 100 * 1024


def test_an_intent_with_a_duplicate_key_is_refused_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = json.dumps(intent("b"), indent=2)
    text = text.replace('"risk": "routine"', '"risk": "routine",\n  "goal": "Something else"')
    repo = _repo(tmp_path, {"docs/plans/b.intent.json": text})
    line = text[: text.index('"goal": "Something else"')].count("\n") + 1
    out, _ = _refused(capsys, repo, "check")
    assert f'docs/plans/b.intent.json:{line}: duplicate key "goal"' in out


def test_a_bom_is_read_past_alike_in_intents_and_initiatives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _repo(tmp_path / "plain")
    files = initiative_files("init", TASKS)
    with_bom = {path: "\ufeff" + str(content) for path, content in files.items()}
    bom = make_repo(tmp_path / "bom", with_bom)
    code, expected, err = run_cli(capsys, "plan", "init", "--repo", str(plain))
    assert code == 0, err
    code, planned, err = run_cli(capsys, "plan", "init", "--repo", str(bom))
    assert code == 0, err
    assert planned == expected
