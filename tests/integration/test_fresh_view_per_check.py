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
from imm_action.sandbox.choice import choose_confinement
from imm_action.sandbox.confine import NOT_CONFINED
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
    # the home is made anew for each check (issue 59 #7)
    "a file in the home": "import os; open(os.path.expanduser('~/planted'), 'w').write('x')",
}
# The sibling: passes only on a tree where one of the plants lies.
SIBLING = (
    "import os, sys; planted = os.path.exists('unittest_helper.py') or "
    "os.path.islink('scripts') or os.path.isfile('scripts') or "
    "os.path.exists('scripts/ok') or os.path.exists(os.path.expanduser('~/planted')); "
    "sys.exit(0 if planted else 1)"
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


# what setup leaves in its tree (npm ci's node_modules), bound into every check's
SETUP = "sh -c 'mkdir -p node_modules && echo module > node_modules/index.js'"


def _descriptor_check(check_id: str, body: dict[str, object]) -> Check:
    descriptor = {"contract": "assurance_kernel/verification_descriptor/v2", **body}
    return Check(check_id, parse_descriptor(json.dumps(descriptor)))


@pytest.mark.parametrize("way", sorted(RUNS))
def test_a_cache_under_what_setup_prepared_is_emptied_before_the_next_check(
    tmp_path: Path, way: str
) -> None:
    """Issue 59 #7: `node_modules/.cache` is each check's own (nyc, babel-loader), emptied
    before the next — never one check's cache in another's run."""
    root = make_repo(tmp_path / "r", {"src/app.py": "x = 1\n", ".gitignore": "node_modules/\n"})
    repo = GitRepo(root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    place = _place("overlays", repo)
    place.setup, place.setup_tree = SETUP, git(root, "rev-parse", "HEAD").strip()
    cache = "node_modules/.cache/planted"
    try:
        verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=1,
                            place=place)  # fmt: skip
        poison = _check("hostile:cache", f"import os; os.makedirs(os.path.dirname({cache!r}), "
                        f"exist_ok=True); open({cache!r}, 'w').write('x')")  # fmt: skip
        sibling = _check("victim:ok", f"import os, sys; sys.exit(os.path.exists({cache!r}))")
        results = RUNS[way](verifier, tree, [poison, sibling])
    finally:
        place.close()
    assert [r.passed for r in results] == [True, True], results


@pytest.mark.parametrize("kind", ["overlays", "checkouts"])
def test_an_environments_prepare_runs_before_each_check_of_its_group(
    tmp_path: Path, kind: str
) -> None:
    """Issue 59 #7 (the schema said "once per environment group"): a check's home and tree are
    fresh, so what `prepare` made must be made again for each."""
    root = make_repo(tmp_path / "r", {"src/app.py": "x = 1\n"})
    repo = GitRepo(root)
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    place = _place(kind, repo)
    prepare = {"executable": "python3", "argv": ["-c", (
        "import os; open(os.path.expanduser('~/prepared'), 'w').write('x')")]}  # fmt: skip

    def uses(name: str) -> dict[str, object]:  # two checks, not one command run once
        code = f"import os; os.remove(os.path.expanduser('~/prepared'))  # {name}"
        return {"command": {"executable": "python3", "argv": ["-c", code]},
                "environment": {"prepare": prepare}}  # fmt: skip

    try:
        verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=1,
                            place=place)  # fmt: skip
        results = verifier.verify(tree, [_descriptor_check(f"t:{n}", uses(n)) for n in "ab"])
    finally:
        place.close()
    assert [r.passed for r in results] == [True, True], results
