"""Scope overlap: the tricky cases the reference decides, and agreement with it on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imm_action.plan.scope import ScopeIndex, scope_prefix, scope_prefixes, scopes_overlap
from tests import reference_port
from tests.unit.strategies import scope_entries, scope_lists


@pytest.mark.parametrize(
    ("entry", "prefix"),
    [
        ("src/app/main.py", ("src", "app", "main.py")),
        ("src/app/**", ("src", "app")),
        ("src/*.py", ("src",)),
        ("src/a?b/c", ("src",)),
        ("src/[ab]/c", ("src",)),
        ("src/{a,b}/c", ("src",)),
        ("src/!x", ("src",)),
        ("./src/app", ("src", "app")),
        ("././src", ("src",)),
        ("SRC/App", ("src", "app")),
        ("  src/app  ", ("src", "app")),
        ("src//app/", ("src", "app")),
        ("*.py", ()),
        ("**/x.py", ()),
        ("/etc/passwd", ()),
        ("src\\app", ()),
        ("src/../etc", ()),
        ("src/./app", ()),
        ("", ()),
        ("./", ()),
    ],
)
def test_scope_prefix_reduces_an_entry_as_the_reference_does(
    entry: str, prefix: tuple[str, ...]
) -> None:
    assert scope_prefix(entry) == prefix
    assert list(prefix) == reference_port.scope_prefix(entry)


@pytest.mark.parametrize(
    ("left", "right", "overlap"),
    [
        (["src/a"], ["src/b"], False),
        (["src/a"], ["src/a/deep/file.py"], True),
        (["src/ab"], ["src/a"], False),
        (["src/*.py"], ["src/a/b.py"], True),
        (["docs/**"], ["src/**"], False),
        (["./src/a"], ["SRC/A"], True),
        (["/abs"], ["anything/else"], True),
        (["a\\b"], ["z"], True),
        (["../up"], ["z"], True),
        ([], ["z"], True),
        (["z"], [], True),
        (["*.md"], ["src/a"], True),
    ],
)
def test_scopes_overlap_on_the_tricky_cases(
    left: list[str], right: list[str], overlap: bool
) -> None:
    assert scopes_overlap(left, right) is overlap
    assert reference_port.scopes_overlap(left, right) is overlap


@given(scope_entries())
def test_scope_prefix_agrees_with_the_reference_on_any_entry(entry: str) -> None:
    assert list(scope_prefix(entry)) == reference_port.scope_prefix(entry)


@given(scope_lists, scope_lists)
def test_scopes_overlap_agrees_with_the_reference_and_is_symmetric(
    left: list[str], right: list[str]
) -> None:
    expected = reference_port.scopes_overlap(left, right)
    assert scopes_overlap(left, right) is expected
    assert scopes_overlap(right, left) is expected


@settings(max_examples=200)
@given(st.lists(scope_lists, min_size=1, max_size=8), scope_lists)
def test_scope_index_finds_exactly_the_overlapping_owners(
    registered: list[list[str]], probe: list[str]
) -> None:
    index = ScopeIndex()
    for owner, scope in enumerate(registered):
        index.add(owner, scope_prefixes(scope))
    expected = {owner for owner, scope in enumerate(registered) if scopes_overlap(probe, scope)}
    assert index.overlapping(scope_prefixes(probe)) == expected
    assert index.overlaps_any(scope_prefixes(probe)) is bool(expected)
