"""Scope globs: which changed paths a task's scope_hint allows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.plan.glob import entry_covers, outside_scope


@pytest.mark.parametrize(
    ("entry", "path", "covered"),
    [
        ("src/app", "src/app", True),
        ("src/app", "src/app/main.py", True),
        ("src/app", "src/application.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("src/?.py", "src/a.py", True),
        ("src/?.py", "src/ab.py", False),
        ("src/**", "src/a/b/c.py", True),
        ("src/**", "src", False),
        ("**/conftest.py", "conftest.py", True),
        ("**/conftest.py", "a/b/conftest.py", True),
        ("docs/**/index.md", "docs/index.md", True),
        ("docs/**/index.md", "docs/a/b/index.md", True),
        ("docs/**/index.md", "docs/a/b/other.md", False),
        ("src/a+b.py", "src/a+b.py", True),
        ("SRC/app", "src/app", False),
    ],
)
def test_an_entry_covers_exactly_its_paths(entry: str, path: str, covered: bool) -> None:
    assert entry_covers(entry, path) is covered


def test_outside_scope_lists_the_uncovered_paths_sorted() -> None:
    scope = ["src/app", "tests/test_app.py"]
    changed = ["src/app/x.py", "setup.cfg", "tests/test_app.py", "README.md"]
    assert outside_scope(scope, changed) == ["README.md", "setup.cfg"]


segments = st.lists(st.sampled_from(["a", "b", "src", "x.py"]), min_size=1, max_size=4).map(
    "/".join
)


@given(segments, segments)
def test_a_literal_entry_covers_itself_and_what_lies_below_it(entry: str, path: str) -> None:
    expected = path == entry or path.startswith(entry + "/")
    assert entry_covers(entry, path) is expected


@given(segments)
def test_a_double_star_below_a_folder_covers_everything_in_it(path: str) -> None:
    assert entry_covers("root/**", f"root/{path}")
    assert not entry_covers("root/**", path)
