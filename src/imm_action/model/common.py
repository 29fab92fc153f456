"""Shared field types and the base model every file format derives from (SPEC §4.1)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
GIT_OID_PATTERN = r"^[0-9a-f]{40}([0-9a-f]{24})?$"

Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
Timestamp = Annotated[str, StringConstraints(pattern=TIMESTAMP_PATTERN)]
GitOid = Annotated[str, StringConstraints(pattern=GIT_OID_PATTERN)]


def is_identifier(value: str) -> bool:
    return ID_RE.fullmatch(value) is not None


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
