"""Initiative sources are one seam (issue 9, item 3): only the carrier package and the
composition root know which kinds of carrier exist."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "imm_action"
KINDS = re.compile(r"\b(LocalCarrier|GithubCarrier|GitHubSource|NoIssueSource|carrier\.kind)\b")
ALLOWED = {"carriers", "model/initiative.py", "cli.py"}  # the package, the models, the root


def test_nothing_outside_the_carrier_package_names_a_kind_of_carrier() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if not any(str(path.relative_to(SRC)).startswith(allowed) for allowed in ALLOWED)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if KINDS.search(line)
    ]
    assert offenders == []
