"""Usage errors exit 2 with one line and no traceback, and write nothing (issue 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import make_project
from tests.conftest import run_cli, snapshot


def _imm(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imm_action", *argv],
        cwd=repo, check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


USAGE_ERRORS = {
    "max-parallel 257": (
        ["run", "init", "--max-parallel", "257", "--executor", "true"],
        "imm run: argument --max-parallel: 257 is more than 256 (at most 256 lanes per run)",
    ),
    "plan max-parallel 257": (
        ["plan", "init", "--max-parallel", "257"],
        "imm plan: argument --max-parallel: 257 is more than 256",
    ),
    "unknown base": (["check", "--base", "nope"], "imm check: --base nope: no such commit"),
    "slug too long": (["run", "a" * 129, "--executor", "true"], "is not a valid id"),
    "unbalanced executor": (
        ["run", "init", "--executor", "agent --prompt 'unclosed"],
        'imm run: argument --executor: "agent --prompt \'unclosed" cannot be split into '
        "arguments: No closing quotation",
    ),
    "unknown batch": (["status", "--batch-id", "batch-init-nope"], "no batch batch-init-nope"),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_a_usage_error_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, case: str) -> None:
    argv, message = USAGE_ERRORS[case]
    repo = make_project(tmp_path / "r", {"a": []})
    before = snapshot(repo)
    done = _imm(repo, *argv)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stdout == ""
    assert snapshot(repo) == before


def test_an_unsplittable_executor_in_the_config_is_refused_at_its_line(tmp_path: Path) -> None:
    repo = make_project(
        tmp_path / "r", {"a": []},
        extra_files={".github/imm.yml": "max_parallel: 2\nexecutor: agent 'unclosed\n"},
    )  # fmt: skip
    done = _imm(repo, "check")
    assert done.returncode == 2
    expected = ".github/imm.yml:2: executor: cannot be split into arguments: No closing quotation"
    assert expected in done.stdout


def test_a_closed_stdout_ends_imm_quietly(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "r", {f"t{n}": [] for n in range(300)})
    process = subprocess.Popen(
        [sys.executable, "-m", "imm_action", "plan", "init", "--format", "markdown"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    process.stdout.close()  # as `| head -1` does once it has its line
    _, err = process.communicate(timeout=60)
    assert process.returncode == 141
    assert err == b""


def _config_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str) -> list[str]:
    """What `imm check` says of the config (in-process: the message is what is tested)."""
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2, out + err
    return [line for line in out.splitlines() if line.startswith(".github/imm.yml:")]


def test_a_branch_checks_empty_command_is_one_problem_at_the_commands_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command line or a mapping: the form written is the one judged, never both at once."""
    config = "max_parallel: 2\nbranch_checks:\n  - name: suite\n    command: ''\n"
    problems = _config_problems(tmp_path, capsys, config)
    assert problems == [".github/imm.yml:4: branch_checks.0.command: the command is empty"]


def test_a_branch_checks_descriptor_command_is_judged_as_a_descriptor_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = "branch_checks:\n  - command:\n      executable: 'a b'\n"
    problems = _config_problems(tmp_path, capsys, config)
    assert problems == [
        ".github/imm.yml:3: branch_checks.0.command.executable: 'a b' is neither a tool name "
        "(letters, digits, _.+-) nor './<repo file>'"
    ]


def test_a_branch_check_neither_a_line_nor_a_mapping_is_one_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = _config_problems(tmp_path, capsys, "branch_checks:\n  - 42\n")
    assert problems == [
        ".github/imm.yml:2: branch_checks.0: must be a command line, or a mapping with a "
        "command (and a name, an environment, the paths it reads)"
    ]


def test_a_branch_check_line_whose_command_is_a_bare_path_is_refused_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A branch check runs as a descriptor's command: a tool on PATH or './<repo file>'.
    `scripts/lint.sh` is neither — refused where the config is read, with the spelling that
    works, not after a batch was started."""
    problems = _config_problems(tmp_path, capsys, "branch_checks:\n  - scripts/lint.sh --all\n")
    assert problems == [
        ".github/imm.yml:2: branch_checks.0: 'scripts/lint.sh' is neither a tool name (letters, "
        "digits, _.+-) nor './<repo file>' (a file of the repository: './scripts/lint.sh')"
    ]


def test_imm_run_with_a_branch_check_it_cannot_run_writes_nothing(tmp_path: Path) -> None:
    config = "branch_checks:\n  - name: lint\n    command: scripts/lint.sh\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    before = snapshot(repo)
    done = _imm(repo, "run", "init", "--executor", "true")
    assert done.returncode == 2, done.stderr
    assert ".github/imm.yml:3: branch_checks.0.command: 'scripts/lint.sh'" in done.stderr
    assert "unexpected error" not in done.stderr
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    ("items", "which"),
    [
        ("  - name: suite\n    command: 'true'\n  - name: suite\n    command: 'false'\n", "suite"),
        ("  - 'true'\n  - name: '1'\n    command: 'false'\n", "1"),  # a position is a name
    ],
)
def test_two_branch_checks_of_one_id_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], items: str, which: str
) -> None:
    """Each branch check's verdict and failures are reported under its id: two of one id
    would leave a reader guessing which one failed."""
    problems = _config_problems(tmp_path, capsys, "max_parallel: 2\nbranch_checks:\n" + items)
    assert problems == [
        f".github/imm.yml:2: branch_checks: items 1 and 2 are both branch:{which}: give each a "
        "name of its own"
    ]


def test_a_branch_checks_reads_are_held_to_a_descriptors_rules_at_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a branch check declares it reads is a descriptor's `reads`: a path outside the
    repository is refused where the config is read, as in an intent — not once a batch ran."""
    config = "branch_checks:\n  - command: 'true'\n    reads:\n      - src\n      - ../x\n"
    problems = _config_problems(tmp_path, capsys, config)
    assert problems == [
        ".github/imm.yml:5: branch_checks.0.reads.1: read path '../x' must not contain a '..' "
        "segment"
    ]


def test_held_checks_branch_without_branch_checks_is_refused_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`branch` leaves every later move to the branch checks alone: with none, a lane breaking
    an earlier task's check would land, gated by nothing."""
    problems = _config_problems(tmp_path, capsys, "max_parallel: 2\nheld_checks: branch\n")
    assert problems == [
        ".github/imm.yml:2: held_checks: branch leaves later moves to the branch checks alone, "
        "and branch_checks names none: add the repository's suite there, or remove held_checks"
    ]
