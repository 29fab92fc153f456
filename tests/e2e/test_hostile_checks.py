"""A lane's check goes for the integrate job, end to end with act (issue 20): the lane writes a
probe (tests/attack_executor.py's PROBE) that its own check runs, in its lane job and again at
integration, where the job holds the write token. Both runs are in the sandbox (ADR 0048): it
reads every `/proc/*/environ` and `cmdline` it can, tries to write the job's
`~/.gitconfig`, the git config every step reads, the checkout's `.git/config`, every step's
`$GITHUB_ENV`/`$GITHUB_PATH` and the action's venv, and leaves a process. Nothing it found is the
token, nothing it tried to write changed, nothing it left runs, and the batch lands as without it.

In act every job shares one machine and runs as root: the sandbox alone keeps the probe from
what the jobs use."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.attack_executor import PROBE
from tests.conftest import descriptor
from tests.e2e.act_world import TOKEN, ActWorld
from tests.isolation_probe import running_with


def _targets(world: ActWorld) -> list[dict[str, str]]:
    # act (host mode) keeps each job's GITHUB_ENV and GITHUB_PATH files, its RUNNER_TEMP and the
    # tool cache (where the action's venv lies) under its HOME's .cache/act
    act = f"{world.home}/.cache/act"
    return [
        {"path": str(world.home / ".gitconfig"), "line": "# imm-probe-{uid}"},
        {"path": str(world.root / "gitconfig"), "line": "# imm-probe-{uid}"},  # every step's
        {"path": str(world.work / ".git" / "config"), "line": "# imm-probe-{uid}"},
        {"path": f"{act}/imm-probe-made", "line": "# imm-probe-{uid}"},  # beside the job files
        {"glob": f"{act}/*/act/workflow/envs.txt", "line": "IMM_PROBE_{uid}=1"},
        {"glob": f"{act}/*/act/workflow/pathcmd.txt", "line": "/nonexistent/imm-probe-{uid}"},
        {"glob": f"{act}/tool_cache/imm-action/*/pyvenv.cfg", "line": "# imm-probe-{uid}"},
    ]


def test_a_lanes_check_at_integration_reaches_no_token_and_changes_nothing_the_job_uses(
    world: ActWorld,
) -> None:
    world.behaviour["a"] = "attack"  # copies tools/attack.py to a_attack.py, in its scope
    (world.evidence / "attack.json").write_text(json.dumps({"targets": _targets(world)}))
    world.create(
        {"a": [], "b": []}, "shop", checks={"a": descriptor(["a_attack.py"])},
        files={"tools/attack.py": PROBE.format(out=str(world.evidence))},
    )  # fmt: skip
    world.dispatch({"initiative": "shop"})
    runs = world.run_dispatches()

    # the job behaves as without the probe: every lane lands, only the lanes' own changes
    assert {run.exit_code for run in runs} == {0}, runs[-1].log[-3000:]
    assert world.state()["batch_state"] == "completed"
    changed = world.remote("diff", "--name-only", "refs/heads/main", "refs/heads/imm/shop")
    assert sorted(changed.split()) == ["a.txt", "a_attack.py", "b.txt"]
    pushed = world.remote("for-each-ref", "--format=%(refname)", "refs/heads")
    assert sorted(pushed.split()) == ["refs/heads/imm/shop", "refs/heads/main"]

    # every run of the probe, in a lane job and at integration, ran in the sandbox
    found = sorted(world.evidence.glob("collected-*"))
    assert len(found) >= 2, "the probe never ran in a lane job and at integration"
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    for run in found:
        assert TOKEN.encode() not in run.read_bytes()
        assert basic.encode() not in run.read_bytes()
    explicit = [t["path"] for t in _targets(world) if "path" in t]
    for run in world.evidence.glob("tried-*"):
        tried = json.loads(run.read_text())
        assert set(explicit) <= set(tried)  # it tried every one (what it "wrote" went to the
        # sandbox's private /tmp, where this test's world lies: the files are read back below)
    written = [Path(path) for path in explicit]
    for target in _targets(world):
        if "glob" in target:
            written += [Path(p) for p in sorted(Path("/").glob(target["glob"].lstrip("/")))]
    marks = ("imm-probe-", "IMM_PROBE_")
    assert [p for p in written if p.exists() and any(m in p.read_text() for m in marks)] == []
    assert not running_with(f"left-by-{world.evidence}".encode())
