"""A real npm package's test suite as every task's check (issue 29 #6): minimist with its own
tape suite, seven tasks, three lanes, `check_setup: npm ci` (tests/npm_package.py). One install
for the run — the lanes' checks and the integrator's find the packages it installed — and none
on a second run while the lockfile is unchanged. Needs node and npm (a fact about the machine)
and the npm registry (the package and tape come from there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import npm_package
from tests.batch_helpers import current, make_project

pytestmark = pytest.mark.skipif(not npm_package.npm_available(), reason="no node and npm here")


def _imm_run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo), "--executor",
         npm_package.EXECUTOR, *args], capture_output=True, text=True, check=False,
        timeout=900, env=dict(os.environ),
    )  # fmt: skip


def test_a_real_npm_packages_suite_lands_seven_tasks_with_one_install_and_none_the_next_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    files = npm_package.package_files(tmp_path_factory.mktemp("npm-cache"))
    extra = {**files, ".github/imm.yml": npm_package.config(3), ".gitignore": "node_modules/\n"}
    repo = make_project(
        tmp_path_factory.mktemp("npm") / "r", npm_package.tasks(), checks=npm_package.checks(),
        scopes=npm_package.scopes(), extra_files=extra,
    )  # fmt: skip
    first = _imm_run(repo)
    output = first.stdout + first.stderr
    assert first.returncode == 0, output
    states = {str(c.state) for c in current(repo).state.children}
    assert states == {"integrated"}, output
    assert output.count("check_setup passed") == 1, output  # one `npm ci` for every check
    assert "Cannot find module" not in output
    second = _imm_run(repo, "--fresh")
    again = second.stdout + second.stderr
    assert "check_setup: reused what it prepared before" in again, again
    assert "check_setup passed" not in again


# what webpack's filesystem cache and babel-loader's `cacheDirectory: true` do on first use
CACHE_WRITER = (
    "const fs = require('fs'); fs.mkdirSync('node_modules/.cache/tool', {recursive: true}); "
    "fs.writeFileSync('node_modules/.cache/tool/entry', 'cached')"
)


def test_checks_writing_caches_under_node_modules_land_their_tasks_with_a_cache_per_check(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 43 #4: what `check_setup` prepared (`node_modules`) every check shares read-only,
    and a tool writing its cache under `node_modules/.cache` failed every check with EROFS.
    Two tasks judged under nyc's coverage (its cache goes there when it may write), one by a
    tool that makes its cache folder there without asking."""
    from tests.conftest import descriptor

    _three_tasks_under_nyc(
        tmp_path_factory, npm_package.NYC, descriptor(["-e", CACHE_WRITER], executable="node")
    )


def test_a_suite_under_an_old_nyc_that_writes_the_home_lands_every_task(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 59 #5: nyc before 15 writes `$HOME/.node-spawn-wrap-*`; a check's home was
    setup's, read-only, and every check failed with EROFS. Each check's home is its own now:
    two tasks judged by their file under nyc 14, one by the package's `npm test`."""
    from tests.conftest import descriptor

    _three_tasks_under_nyc(
        tmp_path_factory, npm_package.OLD_NYC, descriptor(["test"], executable="npm")
    )


def _three_tasks_under_nyc(factory: pytest.TempPathFactory, nyc: str, third: str) -> None:
    """Three tasks of the package under nyc at version `nyc`, two judged by their file under
    nyc's coverage, the third by the check `third`: every one lands, no check meets EROFS."""
    files = npm_package.package_files(factory.mktemp("npm-nyc-cache"), nyc=nyc)
    extra = {**files, ".github/imm.yml": npm_package.config(3), ".gitignore": "node_modules/\n"}
    chosen = sorted(npm_package.tasks())[:3]
    checks = {t: c for t, c in npm_package.checks(nyc=True).items() if t in chosen}
    checks[chosen[2]] = third
    repo = make_project(
        factory.mktemp("npm-nyc") / "r", {task: [] for task in chosen}, checks=checks,
        scopes={t: s for t, s in npm_package.scopes().items() if t in chosen}, extra_files=extra,
    )  # fmt: skip
    done = _imm_run(repo)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert {str(c.state) for c in current(repo).state.children} == {"integrated"}, output
    assert "EROFS" not in output
