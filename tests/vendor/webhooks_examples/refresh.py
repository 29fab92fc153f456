"""Refresh examples.json from a new @octokit/webhooks-examples release (see README.md):

npm pack @octokit/webhooks-examples@<version>
python tests/vendor/webhooks_examples/refresh.py octokit-webhooks-examples-<version>.tgz
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

# (event, action or None, which example of that action): the payloads the tests start from.
USED = [
    ("issue_comment", "created", 0),
    ("issue_comment", "created", 1),
    ("pull_request", "opened", 0),
    ("pull_request", "synchronize", 0),
    ("workflow_dispatch", None, 0),
]


def main(tarball: str) -> None:
    with tarfile.open(tarball) as archive:
        package = json.loads(archive.extractfile("package/package.json").read())  # type: ignore[union-attr]
        index = json.loads(archive.extractfile("package/api.github.com/index.json").read())  # type: ignore[union-attr]
    examples = {event["name"]: event["examples"] for event in index}
    trimmed: dict[str, object] = {"version": package["version"], "examples": {}}
    for name, action, nth in USED:
        matching = [e for e in examples[name] if e.get("action") == action]
        key = f"{name}.{action}" if action else name
        trimmed["examples"].setdefault(key, []).append(matching[nth])  # type: ignore[attr-defined]
    target = Path(__file__).with_name("examples.json")
    target.write_text(json.dumps(trimmed, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
