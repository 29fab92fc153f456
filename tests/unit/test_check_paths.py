"""The paths a check names and the scopes that cover them (pure; issue 42 #2, #3)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from imm_action.model.descriptor import parse_descriptor
from imm_action.plan.check_paths import ScopeCoversCheck, named_paths, scope_check_conflicts
from imm_action.plan.lane_change import ChangedEntry, lane_change_refusal


def _command(argv: list[str], executable: str = "python3", cwd: str = "."):  # type: ignore[no-untyped-def]
    body = {"contract": "assurance_kernel/verification_descriptor/v2",
            "command": {"executable": executable, "argv": argv, "cwd": cwd}}  # fmt: skip
    return parse_descriptor(json.dumps(body)).command


def test_a_check_names_its_files_and_folders_but_not_its_options_code_or_the_root() -> None:
    assert named_paths(_command(["-m", "pytest", "-q", "tests/c", "."])) == ["pytest", "tests/c"]
    assert named_paths(_command(["-c", "import tests/x"])) == []
    assert named_paths(_command(["-c", "print(1)"], executable="sh")) == []
    assert named_paths(_command(["../check.sh"], executable="sh", cwd="scripts")) == ["check.sh"]
    assert named_paths(_command(["../../x"], cwd="a")) == []  # leaves the repository
    assert named_paths(_command(["check.py", "/tmp/runs"])) == ["check.py"]  # not in the tree


def test_a_scope_covering_a_named_file_or_what_lies_below_a_named_folder_conflicts() -> None:
    named = {"tests/test_c.py": {"c"}, "tests/d": {"d"}}
    scopes = {"c": ["c.txt", "tests/test_c.py"], "s": ["tests/**"], "e": ["tests/d/e.py"],
              "d": ["d.txt"], "x": ["src/**"]}  # fmt: skip
    assert scope_check_conflicts(scopes, named) == [
        ScopeCoversCheck("e", "tests/d", "d"),
        ScopeCoversCheck("s", "tests/d", "d"),
        ScopeCoversCheck("s", "tests/test_c.py", "c"),
    ]


def _change(path: str) -> ChangedEntry:
    return ChangedEntry(path, "100644")


@given(st.lists(st.sampled_from(["tests", "c", "x.py", "deep"]), min_size=1, max_size=4))
def test_a_path_below_a_named_folder_is_its_owners_alone(parts: list[str]) -> None:
    path = "/".join(["tests", "c", *parts])
    owned = {"tests/c": ["c"]}
    refusal = lane_change_refusal([_change(path)], ["**"], check_files=owned, task_id="s")
    assert refusal == f"lane_touches_check: {path} (c)"
    assert lane_change_refusal([_change(path)], ["**"], check_files=owned, task_id="c") is None
