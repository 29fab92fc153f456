"""Event payloads for tests, built from GitHub's published webhook examples (vendored under
tests/vendor/webhooks_examples) with only the fields a test needs changed."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent / "vendor" / "webhooks_examples" / "examples.json"


@functools.cache
def _examples() -> dict[str, list[dict[str, Any]]]:
    examples: dict[str, list[dict[str, Any]]] = json.loads(EXAMPLES.read_text())["examples"]
    return examples


def example(name: str, nth: int = 0, **changes: Any) -> dict[str, Any]:
    """A copy of GitHub's example `name` (`issue_comment.created`, `workflow_dispatch`, …) with
    `changes` applied: keys are dotted paths (`comment__body` spells `comment.body`)."""
    payload = copy.deepcopy(_examples()[name][nth])
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = payload
        for part in parents:
            node = node[part]
        node[last] = value
    return payload


def write_example(path: Path, name: str, nth: int = 0, **changes: Any) -> Path:
    path.write_text(json.dumps(example(name, nth, **changes)), encoding="utf-8")
    return path
