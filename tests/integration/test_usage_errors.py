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


# A branch check's config problems: each refused where the config is read, at the line of the
# key at fault, in one message (`imm check`; `imm run` and every command read the config alike).
BRANCH_CHECK_PROBLEMS = {
    # a command line or a mapping: the form written is the one judged, never both at once
    "empty command": (
        "max_parallel: 2\nbranch_checks:\n  - name: suite\n    command: ''\n",
        ".github/imm.yml:4: branch_checks.0.command: the command is empty",
    ),
    "descriptor command": (
        "branch_checks:\n  - command:\n      executable: 'a b'\n",
        ".github/imm.yml:3: branch_checks.0.command.executable: 'a b' is neither a tool name "
        "(letters, digits, _.+-) nor './<repo file>'",
    ),
    "neither form": (
        "branch_checks:\n  - 42\n",
        ".github/imm.yml:2: branch_checks.0: must be a command line, or a mapping with a "
        "command (and a name, an environment, the paths it reads)",
    ),
    # a line runs as a descriptor's command: a tool on PATH or './<repo file>', and the hint
    # says the spelling that works
    "bare path": (
        "branch_checks:\n  - scripts/lint.sh --all\n",
        ".github/imm.yml:2: branch_checks.0: 'scripts/lint.sh' is neither a tool name (letters, "
        "digits, _.+-) nor './<repo file>' (a file of the repository: './scripts/lint.sh')",
    ),
    # verdicts and failures are reported by id: two of one id leave a reader guessing
    "one name twice": (
        "max_parallel: 2\nbranch_checks:\n  - name: suite\n    command: 'true'\n"
        "  - name: suite\n    command: 'false'\n",
        ".github/imm.yml:2: branch_checks: items 1 and 2 are both branch:suite: give each a "
        "name of its own",
    ),
    "a name that is another's position": (
        "max_parallel: 2\nbranch_checks:\n  - 'true'\n  - name: '1'\n    command: 'false'\n",
        ".github/imm.yml:2: branch_checks: items 1 and 2 are both branch:1: give each a name "
        "of its own",
    ),
    # what it reads is a descriptor's `reads`, judged as in an intent
    "reads outside the repository": (
        "branch_checks:\n  - command: 'true'\n    reads:\n      - src\n      - ../x\n",
        ".github/imm.yml:5: branch_checks.0.reads.1: read path '../x' must not contain a '..' "
        "segment",
    ),
    # `branch` leaves later moves to the branch checks alone: with none, gated by nothing
    "held_checks branch without branch checks": (
        "max_parallel: 2\nheld_checks: branch\n",
        ".github/imm.yml:2: held_checks: branch leaves later moves to the branch checks alone, "
        "and branch_checks names none: add the repository's suite there, or remove held_checks",
    ),
}


@pytest.mark.parametrize("case", sorted(BRANCH_CHECK_PROBLEMS))
def test_a_branch_check_problem_is_one_message_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    config, problem = BRANCH_CHECK_PROBLEMS[case]
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2, out + err
    assert [line for line in out.splitlines() if line.startswith(".github/imm.yml:")] == [problem]


def test_imm_run_with_a_branch_check_it_cannot_run_writes_nothing(tmp_path: Path) -> None:
    """Refused before a batch starts, not after (it once started one, then died)."""
    config = "branch_checks:\n  - name: lint\n    command: scripts/lint.sh\n"
    repo = make_project(tmp_path / "r", {"a": []}, extra_files={".github/imm.yml": config})
    before = snapshot(repo)
    done = _imm(repo, "run", "init", "--executor", "true")
    assert done.returncode == 2, done.stderr
    assert ".github/imm.yml:3: branch_checks.0.command: 'scripts/lint.sh'" in done.stderr
    assert "unexpected error" not in done.stderr
    assert snapshot(repo) == before


def _task_named_branch(tmp_path: Path) -> Path:
    """Task `branch`'s acceptance item `ok` has the check id `branch:ok`: a branch check's."""
    config = "branch_checks:\n  - name: ok\n    command: 'true'\n"
    return make_project(tmp_path / "r", {"branch": []}, extra_files={".github/imm.yml": config})


def test_a_task_check_with_a_branch_checks_id_is_refused_at_the_acceptance_items_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failures and verdicts are matched to their commands by id: one id for two commands could
    show a reader the wrong one."""
    repo = _task_named_branch(tmp_path)
    code, out, err = run_cli(capsys, "check", "--repo", str(repo))
    assert code == 2, out + err
    assert (
        "docs/plans/branch.intent.json:7: acceptance.0.id: check id branch:ok is also branch "
        "check ok's (.github/imm.yml): rename the acceptance item or the branch check"
    ) in out.splitlines(), out


def test_imm_run_with_a_task_check_holding_a_branch_checks_id_writes_nothing(
    tmp_path: Path,
) -> None:
    repo = _task_named_branch(tmp_path)
    before = snapshot(repo)
    done = _imm(repo, "run", "init", "--executor", "true")
    assert done.returncode == 2, done.stderr
    assert "docs/plans/branch.intent.json:7: acceptance.0.id: check id branch:ok" in done.stderr
    assert snapshot(repo) == before
