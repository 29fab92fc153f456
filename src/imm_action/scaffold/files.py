"""The files `imm init` owns parts of, and how a rerun updates them (ruamel.yaml round trip).

A missing file is written from its template. An existing file keeps everything its owner wrote —
comments, order, values, extra jobs and steps, and the reference it runs the imm action at (a
`@v1`, a commit with its tag in a comment) — except what imm owns in it (ADR 0045):
- the `uses:` of every step that runs the imm action, only when `--action` names a reference;
- the pin of a step running one of GitHub's actions imm uses, when it is still on an older
  major or on a pin imm wrote before (scaffold/pins.py; a pin the user chose stays);
- the inputs of `imm-batch.yml`'s `workflow_dispatch` and `workflow_call`, which must declare
  everything imm sends in a dispatch (GitHub refuses a dispatch with an undeclared input: 422).
`.github/imm.yml` is the user's entirely once it exists. A workflow at one of imm's paths with no
step running the imm action is someone else's: it is reported and left as it is.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from imm_action.errors import InputError, Problem
from imm_action.scaffold.pins import upgrade_of
from imm_action.scaffold.suites import AGENT_HOSTS, LOOKED_FOR, found_registries, found_suites

LOCAL_ACTION = "./"
DEFAULT_ACTION = "imm-action/imm-action@v0"
CONFIG_FILE = ".github/imm.yml"
WORKFLOWS = ("imm-batch.yml", "imm-command.yml", "imm-check.yml")
DISPATCHED = "imm-batch.yml"


@dataclass(frozen=True)
class FileChange:
    path: str
    notes: tuple[str, ...]  # ("created",) or one line per owned part that changed
    text: str  # the file's new content
    write: bool = True  # False: a file that is not imm's, reported and left alone


def template(name: str, action: str) -> str:
    text = resources.files("imm_action.scaffold").joinpath("templates", name).read_text("utf-8")
    return text.replace(f"uses: {LOCAL_ACTION}\n", f"uses: {action}\n")


def default_action(repo: Path) -> str:
    """`./` in a repository that holds the imm action itself (this project, or a vendored
    copy), else the published action."""
    manifest = repo / "action.yml"
    if manifest.is_file() and manifest.read_text(encoding="utf-8").startswith("name: imm-action\n"):
        return LOCAL_ACTION
    return DEFAULT_ACTION


def planned_files() -> list[tuple[str, str]]:
    """(path in the repository, template name) of every file imm init owns parts of."""
    return [(CONFIG_FILE, "imm.yml")] + [(f".github/workflows/{n}", n) for n in WORKFLOWS]


def changes_for(repo: Path, action: str, *, pin_action: bool = False) -> list[FileChange]:
    """What imm init would change in `repo`, file by file (nothing for an up-to-date repo).
    `pin_action`: move existing steps that run imm to `action` (`--action` given); else they
    keep the reference their owner chose."""
    found: list[FileChange] = []
    for relative, name in planned_files():
        wanted = template(name, action)
        path = repo / relative
        if not path.is_file():
            created: tuple[str, ...] = ("created",)
            if name == "imm.yml":
                proposal, said = branch_checks_proposal(repo)
                network, reaches = network_proposal(repo)
                wanted += proposal + network
                created = ("created", said, reaches)
            found.append(FileChange(relative, created, wanted))
            continue
        if name == "imm.yml":
            continue
        current = path.read_text(encoding="utf-8")
        updated, notes = update_workflow(relative, current, wanted, action if pin_action else None)
        if updated is None:
            found.append(FileChange(relative, tuple(notes), current, write=False))
        elif notes:
            found.append(FileChange(relative, tuple(notes), updated))
    return found


def branch_checks_proposal(repo: Path) -> tuple[str, str]:
    """The config's `branch_checks` from what `found_suites` finds — set, with `held_checks:
    branch` (ADR 0068) — or, where it finds none, an example commented out; and the line
    `imm init` prints of it."""
    found = found_suites(repo)
    if not found:
        lines = [
            "",
            "# The repository's own checks, which every move of the batch branch must pass",
            "# besides the tasks' checks (ADR 0061). imm init found no suite here; for example:",
            "# branch_checks:",
            "#   - make test",
        ]
        said = f"no test suite found ({LOOKED_FOR}): branch_checks is left commented out"
        return "\n".join(lines) + "\n", said
    lines = [
        "",
        "# The repository's own checks, found by imm init: every move of the batch branch must",
        "# pass them besides the tasks' checks, and the base is verified against them before",
        "# any lane starts (ADR 0061). Remove one that is not the suite.",
        "branch_checks:",
        *(f"  - {suite}" for suite in found),
        "# The suite holds the tasks' tests: each task's checks gate its own lane's move, the",
        "# suite every move (ADR 0068). `all` reruns every task's checks on every move too.",
        "held_checks: branch",
    ]
    return "\n".join(lines) + "\n", f"branch_checks: {', '.join(found)}; held_checks: branch"


def network_proposal(repo: Path) -> tuple[str, str]:
    """`lane_network` for the agents imm's recipes run and `check_network` for the registries
    the repository installs from (issue 60, ADR 0070), and the line `imm init` prints of it."""
    registries = found_registries(repo)
    lines = [
        "",
        "# What executors and lane_setup may reach (ADR 0070): the hosts of the agents the",
        "# recipes run (Claude Code, Codex); a refused host is named in the report with the",
        "# line that allows it. `open` lets them reach any host.",
        "lane_network:",
        *(f"  - {host}" for host in AGENT_HOSTS),
        "# What checks and check_setup may reach: the registries this repository installs from,",
        "# as imm init found them (`none`: no network at all).",
    ]
    if registries:
        lines += ["check_network:", *(f"  - {host}" for host in registries)]
    else:
        lines.append("check_network: none")
    said = (f"lane_network: {', '.join(AGENT_HOSTS)}; check_network: "
            f"{', '.join(registries) or 'none'}")  # fmt: skip
    return "\n".join(lines) + "\n", said


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    return yaml


def update_workflow(
    relative: str, current: str, wanted: str, action: str | None
) -> tuple[str | None, list[str]]:
    """The file with imm's parts brought up to date, and a line per change made; None (with
    why) for a workflow that is not imm's. `action`: the reference steps running imm move to
    (None: they keep theirs)."""
    from ruamel.yaml.error import YAMLError

    yaml = _yaml()
    try:
        data = yaml.load(current)
    except YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError([Problem(relative, line, f"is not valid YAML: {error}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(relative, 1, "must be a workflow (a mapping)")])
    if not _runs_imm(data):
        return None, [
            "not imm's (no step runs the imm action): left as it is; move it elsewhere or "
            "delete it, then run imm init again to get imm's"
        ]
    template_data = yaml.load(wanted)
    notes = _update_uses(data, action)
    if relative.endswith(DISPATCHED):
        notes += _update_inputs(data, template_data)
    if not notes:
        return current, []
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue(), notes


def _is_imm_action(uses: object) -> bool:
    if not isinstance(uses, str):
        return False
    return uses == LOCAL_ACTION or uses.split("@")[0].endswith("/imm-action")


def _steps(data: Any) -> list[tuple[str, int, Any]]:
    jobs = data.get("jobs")
    found = []
    for job_name, job in (jobs if isinstance(jobs, dict) else {}).items():
        steps = job.get("steps") if isinstance(job, dict) else None
        for index, step in enumerate(steps if isinstance(steps, list) else []):
            if isinstance(step, dict):
                found.append((job_name, index, step))
    return found


def _runs_imm(data: Any) -> bool:
    return any(_is_imm_action(step.get("uses")) for _, _, step in _steps(data))


def _update_uses(data: Any, action: str | None) -> list[str]:
    notes = []
    for job_name, index, step in _steps(data):
        uses = step.get("uses")
        where = f"jobs.{job_name}.steps[{index}].uses"
        if action is not None and _is_imm_action(uses) and uses != action:
            step["uses"] = action
            step.ca.items.pop("uses", None)  # a pin's tag comment belongs to the old reference
            notes.append(f"{where}: {uses} -> {action}")
        elif isinstance(uses, str) and (pin := upgrade_of(uses)) is not None:
            step["uses"] = f"{uses.partition('@')[0]}@{pin.sha}"
            _set_line_comment(step, "uses", f"# {pin.tag}")
            notes.append(f"{where}: {uses} -> {step['uses']} ({pin.tag})")
    return notes


def _set_line_comment(mapping: Any, key: str, text: str) -> None:
    """`text` as the end-of-line comment of `key` (a pin's tag), replacing the one it had and
    keeping the comment lines that follow it (ruamel stores them in the same token)."""
    old = mapping.ca.items.pop(key, None)
    following = ""
    if old and old[2] is not None and "\n" in old[2].value:
        following = old[2].value.split("\n", 1)[1]
    mapping.yaml_add_eol_comment(text, key)
    if following:
        token = mapping.ca.items[key][2]
        token.value = token.value.rstrip("\n") + "\n" + following


def _triggers(data: Any) -> Any:
    # YAML 1.1 readers turn a bare `on` key into True; ruamel keeps the string.
    return data.get("on", data.get(True))


def _update_inputs(data: Any, template_data: Any) -> list[str]:
    notes = []
    triggers, wanted = _triggers(data), _triggers(template_data)
    if not isinstance(triggers, dict):
        return []
    for trigger in ("workflow_dispatch", "workflow_call"):
        if trigger not in triggers:
            continue
        if triggers[trigger] is None:
            triggers[trigger] = {}
        inputs = triggers[trigger].setdefault("inputs", {})
        for name, spec in wanted[trigger]["inputs"].items():
            if name not in inputs:
                inputs[name] = spec
                notes.append(f"on.{trigger}.inputs.{name}: added (imm dispatches it)")
    return notes
