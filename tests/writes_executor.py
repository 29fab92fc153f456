"""A test executor that writes what its task is told to: `IMM_TEST_WRITES` names a JSON file of
{task: {path: content, or null to delete it}}. An agent that meets a test it cannot pass does
the same things: rewrites the code, deletes or skips the test, deselects it, rewrites the
suite's script."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    writes = json.loads(Path(os.environ["IMM_TEST_WRITES"]).read_text()).get(task, {})
    for path, content in writes.items():
        target = Path(path)
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
