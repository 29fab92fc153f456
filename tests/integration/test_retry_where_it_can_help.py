"""A retry is offered only where it can change the verdict (issue 62 #3): a task whose change
breaks a test outside its scope is parked by the branch check, and the report offered `imm
retry <task>` as it is — a second lane (an agent's money) that parks again, since its lane may
not change that test. The report now names the tests, says they lie outside the task's scope,
and offers no plain retry for it; a failing test in scope keeps the plain retry."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import PYTEST_CHECK, descriptor
from tests.integration.test_judged_by_tests import BROKEN, TESTS, VALUE, imm_run

SUITE = shlex.join(["python3", *PYTEST_CHECK, "tests"])


def _project(root: Path, scope: list[str]) -> Path:
    """`brk` changes `value`, which the suite's `test_good` tests; `ok` is honest."""
    return make_project(
        root, {"brk": [], "ok": []},
        scopes={"brk": scope, "ok": ["ok.txt"]},
        checks={"brk": descriptor(["-c", "import pkg.value"])},
        extra_files={"pkg/__init__.py": "", "pkg/value.py": VALUE, "tests/test_value.py": TESTS,
                     ".github/imm.yml": f"branch_checks:\n  - {json.dumps(SUITE)}\n"},
    )  # fmt: skip


def test_a_test_failing_outside_the_tasks_scope_is_named_and_no_plain_retry_is_offered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path / "r", ["pkg/**"])
    code, said = imm_run(tmp_path, capsys, repo, {"brk": {"pkg/value.py": BROKEN},
                                                  "ok": {"ok.txt": "ok\n"}})  # fmt: skip
    assert code == 1, said
    children = {child.task_id: child for child in current(repo).state.children}
    assert children["brk"].failing_outside_scope == ["tests/test_value.py::test_good"]
    assert str(children["ok"].state) == "integrated"
    flat = " ".join(said.split())
    assert (
        "brk's failing tests (tests/test_value.py::test_good) lie outside its scope_hint "
        "(docs/plans/brk.intent.json): its lane may not change them, so a retry as it is "
        "cannot pass them"
    ) in flat, said
    assert "retry init brk" not in said  # no command offers it
    assert "retry one task as it is" not in said


def test_a_failing_test_in_the_tasks_scope_keeps_the_plain_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _project(tmp_path / "r", ["pkg/**", "tests/**"])
    code, said = imm_run(tmp_path, capsys, repo, {"brk": {"pkg/value.py": BROKEN}})
    assert code == 1, said
    brk = next(c for c in current(repo).state.children if c.task_id == "brk")
    assert str(brk.state) == "needs_human"
    assert brk.failing_outside_scope is None
    assert "retry init brk" in said
    assert "lie outside" not in said
