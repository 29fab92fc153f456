"""Shared field types and the base model every file format derives from (SPEC §4.1)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
GIT_OID_PATTERN = r"^[0-9a-f]{40}([0-9a-f]{24})?$"


def id_problem(value: str) -> str | None:
    """Why `value` cannot be a task id, slice id, slug or batch id, or None. Besides the id
    pattern (SPEC §4.1), git must be able to name a ref after it — branches
    `imm-lane/<slug>/<task>`, outcome refs — so `git check-ref-format`'s rules for one path
    component hold too: no `..`, no trailing `.`, no `.lock` suffix (the pattern already
    excludes a leading `.`, `/`, spaces, control characters and `~^:?*[\\@{`)."""
    if ID_RE.fullmatch(value) is None:
        return "ids are 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
    if ".." in value:
        return "git cannot name a ref that holds '..'"
    if value.endswith("."):
        return "git cannot name a ref that ends with '.'"
    if value.endswith(".lock"):
        return "git cannot name a ref that ends with '.lock'"
    return None


def _git_can_name(value: str) -> str:
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN), AfterValidator(_git_can_name)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
Timestamp = Annotated[str, StringConstraints(pattern=TIMESTAMP_PATTERN)]
GitOid = Annotated[str, StringConstraints(pattern=GIT_OID_PATTERN)]


def is_identifier(value: str) -> bool:
    return id_problem(value) is None


class StrictModel(BaseModel):
    """Frozen, no unknown keys, no type coercion: a file either is the format or is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def sha256_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_file_text(data: Any) -> str:
    """The bytes of every state and report file: indented, key order as the model gives it."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def canonical_model_text(model: BaseModel) -> str:
    """`canonical_file_text(model.model_dump(mode="json", by_alias=True))`, byte for byte, but
    serialised by pydantic-core: the stdlib encoder falls back to pure Python when indenting,
    which costs seconds on a 10,000-task plan."""
    return model.model_dump_json(indent=2, by_alias=True) + "\n"


def format_timestamp(moment: datetime) -> str:
    """UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`; the clock itself is read only by callers outside the core."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
