"""GitHub's official OpenAPI description (npm `@octokit/openapi`), fetched with `npm pack` once
and cached, and turned into JSON Schema validators for the responses we rely on."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from jsonschema import Draft4Validator

PACKAGE = "@octokit/openapi@23.0.2"
MEMBER = "package/generated/api.github.com.json"


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "imm-action" / PACKAGE.replace("/", "_").replace("@", "")


def description_path() -> Path:
    """The cached description, fetched on first use; a clear failure if it cannot be had."""
    target = _cache_dir() / "api.github.com.json"
    if target.is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"the contract test needs npm to fetch {PACKAGE} (install Node.js and npm)")
    with tempfile.TemporaryDirectory() as scratch:
        packed = subprocess.run(
            [npm, "pack", PACKAGE, "--silent"],
            cwd=scratch, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if packed.returncode != 0:
            pytest.fail(
                f"npm pack {PACKAGE} failed; the contract test cannot run:\n{packed.stderr}"
            )
        tarball = Path(scratch) / packed.stdout.strip().splitlines()[-1]
        with tarfile.open(tarball) as archive:
            source = archive.extractfile(MEMBER)
            assert source is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            partial.write_bytes(source.read())
            partial.replace(target)
    return target


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema: `nullable: true` becomes "or null"."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


@functools.cache
def description() -> dict[str, Any]:
    raw = json.loads(description_path().read_text(encoding="utf-8"))
    return {"components": _json_schema(raw["components"]), "paths": raw["paths"]}


def response_schema(template: str, method: str, status: int) -> dict[str, Any] | None:
    """The documented schema of a response, or None when GitHub documents no body for it."""
    operation = description()["paths"].get(template, {}).get(method.lower())
    if operation is None:
        raise AssertionError(f"{method} {template} is not in GitHub's OpenAPI description")
    response = operation["responses"].get(str(status))
    if response is None:
        raise AssertionError(f"{method} {template} does not document status {status}")
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[-1]
        response = description()["components"]["responses"][name]
    content = response.get("content", {}).get("application/json")
    return None if content is None else _json_schema(content["schema"])


def validator(template: str, method: str, status: int) -> Draft4Validator | None:
    schema = response_schema(template, method, status)
    if schema is None:
        return None
    return Draft4Validator({**schema, "components": description()["components"]})


# -- requests: every REST call the product makes is a documented operation ---------------------
@functools.cache
def _operations() -> list[tuple[re.Pattern[str], int, str, str]]:
    """(path pattern, literal segments, template, method) of every documented operation."""
    found = []
    for template, item in description()["paths"].items():
        pattern = re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)))
        literal = sum(1 for part in template.split("/") if part and not part.startswith("{"))
        for method in item:
            if method in ("get", "post", "patch", "put", "delete"):
                found.append((pattern, literal, template, method))
    return found


def _parameter(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        parameter: dict[str, Any] = description()["components"]["parameters"][
            node["$ref"].rsplit("/", 1)[-1]
        ]
        return parameter
    return node


def request_problems(method: str, path: str, query: str, body: bytes) -> list[str]:
    """Why a REST request is not what GitHub's description documents (empty when it is)."""
    call = f"{method} {path}{'?' + query if query else ''}"
    matches = [
        (literal, template)
        for pattern, literal, template, documented in _operations()
        if documented == method.lower() and pattern.fullmatch(path)
    ]
    if not matches:
        return [f"{call}: no such operation in GitHub's OpenAPI description"]
    template = max(matches)[1]
    operation = description()["paths"][template][method.lower()]
    problems = []
    known = {
        parameter["name"]
        for parameter in map(_parameter, operation.get("parameters", []))
        if parameter["in"] == "query"
    }
    for name in parse_qs(query, keep_blank_values=True):
        if name not in known:
            problems.append(f"{call}: {template} has no query parameter {name!r}")
    if body:
        content = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if content is None:
            return [*problems, f"{call}: {template} takes no JSON body"]
        schema = {**_json_schema(content["schema"]), "components": description()["components"]}
        for error in Draft4Validator(schema).iter_errors(json.loads(body)):
            where = "/".join(map(str, error.absolute_path)) or "(body)"
            problems.append(f"{call}: body at {where}: {error.message[:200]}")
    return problems
