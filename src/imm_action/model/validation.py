"""Turning pydantic's errors into `json.path: message` pairs a person can act on."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


def json_path(loc: Sequence[int | str]) -> str:
    """`('acceptance', 0, 'id')` -> `acceptance[0].id`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


Loc = tuple[int | str, ...]

# The tags of a union judged by the form its value was written in (a command line or a mapping;
# a network key's word or list of hosts): pydantic puts the tag in an error's location, where a
# person looks for keys.
LINE_FORM = "command line"
MAPPING_FORM = "mapping"
WORD_FORM = "open or none"
HOSTS_FORM = "list of hosts"


def validation_messages(error: ValidationError) -> list[tuple[str, str]]:
    return [(json_path(loc), message) for loc, message in located_messages(error)]


def located_messages(error: ValidationError) -> list[tuple[Loc, str]]:
    """Each error as (location in the document, message), with pydantic's jargon translated."""
    problems: list[tuple[Loc, str]] = []
    for item in error.errors(include_url=False):
        loc = tuple(part for part in item["loc"] if not _is_union_tag(part))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        elif item["type"] == "missing":
            message = "required key is missing"
        problems.append((loc, message))
    return problems


def _is_union_tag(part: int | str) -> bool:
    # pydantic names the union member it tried (e.g. 'function-after[...]'); people need the key.
    return isinstance(part, str) and (
        "[" in part
        or part in {"str", "int", "list[str]", LINE_FORM, MAPPING_FORM, WORD_FORM, HOSTS_FORM}
    )
