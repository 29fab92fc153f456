"""No check sees what another check of the same tree wrote (issue 42 #1): a hostile check run
first plants an untracked module its siblings import, or swaps a tracked folder for a link or a
file — and the siblings' checks must still run on the tree under test. Real git, the real
sandbox (overlay trees) and whole checkouts (no sandbox), one worker, both ways a verifier
runs a tree's checks (one environment's group, and the shared queue of the integrator)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from imm_action.git.repo import GitRepo
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.sandbox.confine import NOT_CONFINED, choose_confinement
from imm_action.verify.check_setup import CheckPlace
from imm_action.verify.checks import Check, TreeJob, Verifier
from imm_action.verify.result_cache import ResultCache
from tests.conftest import git, make_repo

# Planted by the first check; each makes the sibling below pass where it must fail.
PLANTS = {
    "an untracked module": "open('unittest_helper.py', 'w').write('OK = True\\n')",
    "a folder swapped for a link": (
        "import os, shutil, tempfile; d = tempfile.mkdtemp(); "
        "open(os.path.join(d, 'ok'), 'w').write('yes'); "
        "shutil.rmtree('scripts'); os.symlink(d, 'scripts')"
    ),
    "a folder swapped for a file": (
        "import shutil; shutil.rmtree('scripts'); open('scripts', 'w').write('yes')"
    ),
}
# The sibling: passes only on a tree where one of the plants lies.
SIBLING = (
    "import os, sys; planted = os.path.exists('unittest_helper.py') or "
    "os.path.islink('scripts') or os.path.isfile('scripts') or "
    "os.path.exists('scripts/ok'); sys.exit(0 if planted else 1)"
)


def _check(check_id: str, code: str) -> Check:
    body = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": ["-c", code]},
    }
    return Check(check_id, parse_descriptor(json.dumps(body)))


def _place(kind: str, repo: GitRepo) -> CheckPlace:
    if kind == "checkouts":
        return CheckPlace(NOT_CONFINED, os.environ["PATH"])
    confinement = choose_confinement(
        "auto", holds_credential=False, git_folders=[repo.common_directory()]
    )
    assert confinement.active, confinement.why
    return CheckPlace(confinement, os.environ["PATH"])


def _by_group(verifier: Verifier, tree: str, checks: list[Check]) -> list[CheckResult]:
    return verifier.verify(tree, checks)


def _by_queue(verifier: Verifier, tree: str, checks: list[Check]) -> list[CheckResult]:
    return verifier.verify_queued([TreeJob(tree, tuple(checks))])[0]


RUNS: dict[str, Callable[[Verifier, str, list[Check]], list[CheckResult]]] = {
    "group": _by_group,
    "queue": _by_queue,
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("kind", ["overlays", "checkouts"])
@pytest.mark.parametrize("way", sorted(RUNS))
def test_a_check_never_sees_what_a_sibling_check_wrote(
    tmp_path: Path, plant: str, kind: str, way: str
) -> None:
    root = make_repo(tmp_path / "r", {"scripts/run.sh": "echo run\n", "src/app.py": "x = 1\n"})
    repo = GitRepo(root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    place = _place(kind, repo)
    try:
        verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=1,
                            place=place)  # fmt: skip
        poison = _check("hostile:plant", PLANTS[plant])
        sibling = _check("victim:ok", SIBLING)
        results = RUNS[way](verifier, tree, [poison, sibling])
    finally:
        place.close()
    assert [r.check_id for r in results] == ["hostile:plant", "victim:ok"]
    victim = results[1]
    # it ran on the tree under test, as on the branch: it found no plant (exit 1) and nothing
    # changed under it (a change left by the plant would blame the victim's lane)
    assert (victim.exit_code, victim.changed_outside) == (1, []), victim
