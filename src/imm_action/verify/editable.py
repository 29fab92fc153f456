"""Why a check cannot import the project (issue 41 #5): an editable install of it in the
caller's venv points into the caller's checkout, which the sandbox never shows a check — and
where shown, would import the caller's tree, not the candidate's. `check_setup` is the way: an
editable install made there follows every check's tree (check_setup.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from imm_action.model.outcome import Failure

# what a check prints when the project (or a package) cannot be imported
NOT_IMPORTABLE = ("ModuleNotFoundError", "Cannot find module", "No module named")


def editable_install_of(root: Path, environ: Mapping[str, str]) -> Path | None:
    """The record of an editable install of the project at `root` in the active venv
    (`VIRTUAL_ENV`): PEP 610's `direct_url.json` with `editable`, or an old `.egg-link`."""
    venv = environ.get("VIRTUAL_ENV")
    if not venv:
        return None
    target = root.resolve()
    for site in Path(venv).glob("lib/python*/site-packages"):
        for record in site.glob("*.dist-info/direct_url.json"):
            if _editable_at(record) == target:
                return record
        for link in site.glob("*.egg-link"):
            if _first_line_path(link) == target:
                return link
    return None


def needs_check_setup_hint(
    failures: Iterable[Failure], root: Path, environ: Mapping[str, str], has_setup: bool
) -> str | None:
    """The hint for a run whose checks failed to import, when the caller's venv holds an
    editable install of the project and no `check_setup` prepares one; else None."""
    if has_setup:
        return None
    if not any(any(mark in f.output_tail for mark in NOT_IMPORTABLE) for f in failures):
        return None
    record = editable_install_of(root, environ)
    if record is None:
        return None
    return (
        f"a check could not import a module, and your venv ({environ['VIRTUAL_ENV']}) holds an "
        f"editable install of this project ({record}): checks never see your checkout, and "
        "must not test it — install the project in check_setup instead (.github/imm.yml, "
        'e.g. check_setup: bash -c "python3 -m venv $HOME/.venv && $HOME/.venv/bin/pip '
        'install -q -e . pytest"), which follows the tree each check runs in'
    )


def _editable_at(record: Path) -> Path | None:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not (data.get("dir_info") or {}).get("editable"):
        return None
    url = urlparse(str(data.get("url", "")))
    if url.scheme != "file":
        return None
    return Path(unquote(url.path)).resolve()


def _first_line_path(link: Path) -> Path | None:
    try:
        first = link.read_text(encoding="utf-8").splitlines()[0].strip()
    except (OSError, IndexError):
        return None
    return Path(first).resolve() if first else None
