"""Task ids, slice ids and slugs name git refs (`imm-lane/<slug>/<task>`, outcome refs): every
id the model accepts is one git can name, and every class of name git refuses is refused here
first, before any lane does paid work (issue 21)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from imm_action.model.common import ID_RE, Identifier, id_problem, is_identifier

ID_ADAPTER: TypeAdapter[str] = TypeAdapter(Identifier)


def git_can_name(*components: str) -> bool:
    ref = "refs/heads/imm-lane/" + "/".join(components)
    return subprocess.run(["git", "check-ref-format", ref], check=False).returncode == 0


@settings(max_examples=200, deadline=None)
@given(st.from_regex(ID_RE, fullmatch=True))
def test_every_id_the_model_accepts_is_a_name_git_accepts(value: str) -> None:
    if is_identifier(value):
        assert git_can_name(value, value)
        assert ID_ADAPTER.validate_python(value) == value
    else:
        assert not git_can_name(value)


BAD = {
    "two dots": ("x..y", "'..'"),
    "dots at the end": ("x..", "'..'"),
    "lock suffix": ("z.lock", "'.lock'"),
    "trailing dot": ("z.", "ends with '.'"),
    "leading dot": (".z", "starting with a letter or digit"),
    "at-brace": ("a@{b", "letters, digits"),
    "slash": ("a/b", "letters, digits"),
    "space": ("a b", "letters, digits"),
    "control character": ("a\x1bb", "letters, digits"),
    "unicode": ("ünï", "letters, digits"),
    "too long": ("a" * 129, "1 to 128"),
}


@pytest.mark.parametrize("value", [value for value, _ in BAD.values()], ids=list(BAD))
def test_every_class_of_name_git_refuses_is_refused_with_the_reason(value: str) -> None:
    why = id_problem(value)
    assert why is not None
    assert dict(BAD.values())[value] in why
    with pytest.raises(ValidationError):
        ID_ADAPTER.validate_python(value)
