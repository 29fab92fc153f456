"""`imm schema <name>`: the JSON Schema generated from a format's pydantic model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from imm_action.console import CommandIO
from imm_action.errors import UsageError
from imm_action.model.schemas import SCHEMA_MODELS, json_schema


@dataclass(frozen=True)
class SchemaArgs:
    name: str | None
    write: Path | None


def schema_text(name: str) -> str:
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


def run(args: SchemaArgs, io: CommandIO) -> int:
    if args.write is not None:
        if args.write.exists() and not args.write.is_dir():
            raise UsageError(f"--write takes a folder: {args.write} is a file")
        args.write.mkdir(parents=True, exist_ok=True)
        for name in SCHEMA_MODELS:
            (args.write / f"{name}.json").write_text(schema_text(name), encoding="utf-8")
            io.warn(f"wrote {args.write / f'{name}.json'}")
        return 0
    if args.name is None:
        raise UsageError(f"imm schema: name one of {', '.join(SCHEMA_MODELS)} (or --write DIR)")
    io.out.write(schema_text(args.name))
    return 0
