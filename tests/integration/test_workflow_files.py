"""The shipped action and workflows: lint-clean, least privilege, no expression in a script,
and identical to what `imm init` writes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from imm_action.scaffold.pins import pinned
from imm_action.verify.check_setup import READY

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("imm-*.yml"))
BIN = Path(sys.executable).parent


STAND_IN_SCRIPTS = sorted((ROOT / "tests" / "e2e" / "stand_ins").glob("*/*.sh"))


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is missing: pip install -e '.[test]'"
    return found


def _load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def _run_scripts(document: Any) -> list[str]:
    found: list[str] = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "run" and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_run_scripts(value))
    elif isinstance(document, list):
        for item in document:
            found.extend(_run_scripts(item))
    return found


def test_actionlint_finds_nothing_in_the_workflows_and_the_action_they_use() -> None:
    done = subprocess.run(
        [_tool("actionlint"), "-no-color"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("schema", "files"),
    [
        ("vendor.github-actions", [ROOT / "action.yml"]),
        ("vendor.github-workflows", WORKFLOWS),
    ],
)
def test_files_validate_against_the_published_schema(schema: str, files: list[Path]) -> None:
    done = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", [ROOT / "action.yml", *WORKFLOWS], ids=lambda p: p.name)
def test_no_script_expands_an_event_field_or_an_input(path: Path) -> None:
    untrusted = re.compile(r"\$\{\{[^}]*\b(github\.event|inputs)\.")
    for script in _run_scripts(_load(path)):
        assert not untrusted.search(script), f"{path.name}: {script}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_job_asks_for_its_own_permissions_and_the_workflow_for_none(path: Path) -> None:
    workflow = _load(path)
    assert workflow["permissions"] == {}
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} has no permissions"
    lines = path.read_text(encoding="utf-8").splitlines()
    scopes = [line for line in lines if re.match(r"\s+[a-z-]+: (read|write)\b", line)]
    assert scopes
    assert all("#" in line for line in scopes), "each permission says why"


def test_the_lane_job_checks_out_without_credentials_and_carries_the_task_in_its_name() -> None:
    lane = _load(ROOT / ".github" / "workflows" / "imm-batch.yml")["jobs"]["lane"]
    assert "matrix.task" in lane["name"]
    assert lane["if"] == "needs.plan.outputs.has-lanes == 'true'"
    assert lane["strategy"]["fail-fast"] is False
    checkout = lane["steps"][0]
    assert checkout["uses"] == pinned("actions/checkout")
    assert checkout["with"]["persist-credentials"] is False


def _job_steps(command: str) -> list[dict[str, Any]]:
    """The action's steps a `command` job may run: its own, and the cache steps around its
    work (their conditions name the fetch step's outputs)."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    ours = (f"inputs.command == '{command}'", "steps.fetch.", "steps.setup-ready.")
    return [s for s in steps if any(mark in s.get("if", "") for mark in ours)]


def test_no_lane_step_from_the_executors_on_is_given_a_token() -> None:
    lane = _job_steps("lane")
    work = next(s for s in lane if s.get("env", {}).get("IMM_COMMAND") == "lane-work")
    after = lane[lane.index(work) :]
    assert [s.get("env", {}).get("IMM_COMMAND") for s in after] == [
        "lane-work",
        "lane-bundle",
        None,
        "setup-ready",
        None,
    ]
    for step in after:
        given = {**step.get("env", {}), **step.get("with", {})}
        assert not [k for k, v in given.items() if "token" in f"{k}{v}".lower()], step["name"]
    bundle, upload = after[1], after[2]
    assert bundle["if"].startswith("always()")
    assert upload["if"].startswith("always()")
    assert upload["uses"] == pinned("actions/upload-artifact")
    assert upload["with"]["name"] == "${{ steps.bundle.outputs.artifact }}"


@pytest.mark.parametrize("command", ["lane", "verify"])
def test_a_job_restores_what_check_setup_prepared_before_its_work_and_saves_it_only_whole(
    command: str,
) -> None:
    """Issue 62 #6: restored under the fetch step's key before any check runs; saved under
    the same key and path only where nothing was restored and imm marked the folder ready (the
    mark `check_setup.READY`, written last), also after a failed lane."""
    steps = _job_steps(command)
    uses = [s.get("uses", "").partition("@")[0] for s in steps]
    restore = steps[uses.index("actions/cache/restore")]
    save = steps[uses.index("actions/cache/save")]
    works = ("lane-work", "verify-run")
    work = next(s for s in steps if s.get("env", {}).get("IMM_COMMAND") in works)
    ready = next(s for s in steps if s.get("env", {}).get("IMM_COMMAND") == "setup-ready")
    assert steps.index(restore) < steps.index(work) < steps.index(ready) < steps.index(save)
    assert restore["uses"] == save["uses"].replace("/save@", "/restore@")
    assert restore["with"] == save["with"]
    assert "steps.fetch.outputs.setup-key" in restore["with"]["key"]
    assert "steps.setup-restore.outputs.cache-hit != 'true'" in ready["if"]
    assert ready["if"].startswith("always()")
    assert save["if"].startswith("always()")
    assert "steps.setup-ready.outputs.ready == 'true'" in save["if"]
    script = (ROOT / "action" / "run.sh").read_text(encoding="utf-8")
    assert f'[ -f "${{IMM_SETUP_PATH:?}}/{READY}" ]' in script


def test_the_lane_job_may_only_read_the_repository() -> None:
    lane = _load(ROOT / ".github" / "workflows" / "imm-batch.yml")["jobs"]["lane"]
    assert lane["permissions"] == {"contents": "read"}


def test_the_integrate_step_imports_this_runs_lane_bundles() -> None:
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    download = next(s for s in steps if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "imm-lane-${{ inputs.batch-id }}-*"
    imm = next(s for s in steps if s.get("id") == "imm")
    assert imm["env"]["IMM_LANE_BUNDLES"] == download["with"]["path"]
    assert steps.index(download) < steps.index(imm)


def test_the_dispatched_workflow_declares_every_input_imm_sends() -> None:
    from imm_action.commands.reconcile import continuation_inputs

    workflow = _load(ROOT / ".github" / "workflows" / "imm-batch.yml")
    declared = set(workflow["on"]["workflow_dispatch"]["inputs"])
    assert set(continuation_inputs("slug", "batch-slug-1")) <= declared
    assert {"initiative", "max_parallel"} <= declared  # what /imm run sends


def test_the_shipped_workflows_are_what_imm_init_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.conftest import run_cli

    code, out, _ = run_cli(capsys, "init", "--repo", str(ROOT), "--check")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    "script",
    sorted((ROOT / "action").glob("*.sh")) + sorted((ROOT / "tests/e2e/stand_ins").rglob("*.sh")),
    ids=lambda p: p.name,
)
def test_the_action_scripts_parse(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_shellcheck_finds_nothing_in_the_actions_scripts() -> None:
    scripts = sorted((ROOT / "action").glob("*.sh")) + STAND_IN_SCRIPTS
    done = subprocess.run(
        [_tool("shellcheck"), *map(str, scripts)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_executors_model_key_reaches_the_lane_step_alone_and_a_caller_can_pass_it() -> None:
    """Issue 24 #2 and #11: the key README tells users to add is mapped where the executor
    runs, and the reusable workflow declares it so a calling workflow can pass it."""
    batch = _load(ROOT / ".github/workflows/imm-batch.yml")
    on = batch.get("on", batch.get(True))
    assert set(on["workflow_call"]["secrets"]) == {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    mapped = {
        (job_name, index): step.get("env", {})
        for job_name, job in batch["jobs"].items()
        for index, step in enumerate(job["steps"])
        if "secrets." in str(step.get("env", {}))
    }
    (lane_step,) = mapped
    assert lane_step[0] == "lane"
    assert batch["jobs"]["lane"]["steps"][lane_step[1]]["with"]["command"] == "lane"
    assert mapped[lane_step]["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}"


def test_no_verify_step_from_the_checks_on_is_given_a_token() -> None:
    verify = _job_steps("verify")
    assert [s.get("env", {}).get("IMM_COMMAND") for s in verify] == [
        "${{ inputs.command }}-fetch",
        None,
        "verify-run",
        None,
        "setup-ready",
        None,
    ]
    for step in verify[2:]:
        given = {**step.get("env", {}), **step.get("with", {})}
        assert not [k for k, v in given.items() if "token" in f"{k}{v}".lower()], step["name"]
    upload = verify[3]
    assert upload["if"].startswith("always()")
    assert upload["uses"] == pinned("actions/upload-artifact")
    assert upload["with"]["name"] == "${{ steps.verify.outputs.artifact }}"


@pytest.mark.parametrize("name", ["verify", "probe"])
def test_a_verify_job_may_only_read_the_repository_and_checks_out_without_credentials(
    name: str,
) -> None:
    job = _load(ROOT / ".github" / "workflows" / "imm-batch.yml")["jobs"][name]
    assert job["permissions"] == {"contents": "read"}
    assert job["steps"][0]["with"]["persist-credentials"] is False
    assert job["strategy"]["fail-fast"] is False
    assert "matrix.label" in job["name"]
    assert "matrix.top" in job["name"]


def test_the_integrate_job_waits_for_every_verify_job_and_runs_after_them_whatever_they_did() -> (
    None
):
    jobs = _load(ROOT / ".github" / "workflows" / "imm-batch.yml")["jobs"]
    assert set(jobs["integrate"]["needs"]) == {"plan", "lane", "stack", "verify", "bisect", "probe"}
    assert jobs["integrate"]["if"].startswith("always()")
    for name in ("stack", "verify", "bisect", "probe"):
        assert "!cancelled()" in jobs[name]["if"], name  # a cancelled run fans nothing out
