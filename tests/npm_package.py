"""A real npm package as a repository imm works on (issue 29): minimist 1.2.8, as published,
with its own tape suite (15 files under `test/`). Its devDependencies are cut to tape, the one
its tests need (the others lint and publish it); the lockfile is made by npm from the registry.

Seven tasks, each reviewing one test file (a comment line added: the suite stays green), each
judged by that file under tape — a check of its own — with `check_setup: npm ci`. Used by
tests/integration/test_npm_project.py and benchmarks/npm_project.py."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

PACKAGE = "minimist@1.2.8"
TEST_FILES = ("bool", "dash", "dotted", "long", "num", "parse", "short")
SETUP = "npm ci --no-audit --no-fund --prefer-offline"
_NPM_TIMEOUT_S = 600


def npm_available() -> bool:
    """A fact about this machine: node and npm are installed."""
    return shutil.which("npm") is not None and shutil.which("node") is not None


NYC = "15.1.0"  # istanbul's command line: writes its cache under node_modules/.cache
# nyc before 15 (pinned by many lockfiles) wraps node through spawn-wrap 1, which writes
# `$HOME/.node-spawn-wrap-*` (issue 59 #5)
OLD_NYC = "14.1.1"


def package_files(cache: Path, *, nyc: str | None = None) -> dict[str, str]:
    """The package's files (text), with the cut devDependencies (and nyc at version `nyc`)
    and npm's lockfile for them; fetched once into `cache`. With nyc, `npm test` runs the
    suite under it (`nyc tape test/*.js`), as in many packages."""
    folder = cache / "package"
    if not (folder / "package-lock.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=cache, check=True,
                       capture_output=True, timeout=_NPM_TIMEOUT_S)  # fmt: skip
        (tarball,) = cache.glob("minimist-*.tgz")
        with tarfile.open(tarball) as archive:
            archive.extractall(cache, filter="data")
        manifest = json.loads((folder / "package.json").read_text())
        manifest["devDependencies"] = {"tape": manifest["devDependencies"]["tape"]}
        if nyc:
            manifest["devDependencies"]["nyc"] = nyc
        manifest["scripts"] = {"test": f"{'nyc ' if nyc else ''}tape test/*.js"}
        (folder / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
        subprocess.run(
            ["npm", "install", "--package-lock-only", "--no-audit", "--no-fund"],
            cwd=folder, check=True, capture_output=True, timeout=_NPM_TIMEOUT_S,
        )  # fmt: skip
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".github" not in path.parts
    }


def tasks() -> dict[str, list[str]]:
    return {f"review_{name}": [] for name in TEST_FILES}


def checks(*, nyc: bool = False) -> dict[str, str]:
    """Each task's own check: its test file under tape, from what `npm ci` installed; `nyc`:
    under nyc's coverage, as `npm test` runs it in many packages."""
    from tests.conftest import descriptor

    coverage = ["node_modules/nyc/bin/nyc.js", "--silent", "node"] if nyc else []
    return {
        f"review_{name}": descriptor(
            [*coverage, "node_modules/tape/bin/tape", f"test/{name}.js"], executable="node"
        )
        for name in TEST_FILES
    }


def scopes() -> dict[str, list[str]]:
    return {f"review_{name}": [f"test/{name}.js"] for name in TEST_FILES}


def config(lanes: int) -> str:
    return f"check_setup: {SETUP}\nmax_parallel: {lanes}\n"


EXECUTOR = shlex.join([sys.executable, "-c", (
    "import os, pathlib; task = os.environ['IMM_TASK_ID']; "
    "path = pathlib.Path('test', task.removeprefix('review_') + '.js'); "
    "path.write_text(path.read_text() + '// reviewed by ' + task + chr(10))"
)])  # fmt: skip
