"""Toolchains that live in the home run in lane code as for the user (issue 59 #6, ADR 0067):
a Rust crate through rustup (`~/.cargo/bin` on PATH, its toolchains in `~/.rustup`) and an
offline Maven project (`~/.m2` filled), each landing every honest task with nothing set beyond
the documented recipe (docs/formats.md), the repository's suite as `branch_checks`. The
executor writes one test file per task and runs the task's check itself first, so the lane
runs the toolchain as an executor would.

Each needs its toolchain on this machine (cargo through rustup; mvn with the plugins below in
`~/.m2`): a fact about the machine, not a choice of the product's."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.batch_helpers import current, make_project
from tests.conftest import descriptor

HOME = Path(os.environ.get("HOME") or Path.home())

# The executor: writes the task's test file, then runs the task's own check as an agent would.
EXECUTOR = shlex.join([sys.executable, "-c", (
    "import json, os, pathlib, subprocess, sys; task = os.environ['IMM_TASK_ID']; "
    "spec = json.loads(os.environ['TEST_TOOLCHAIN']); "
    "path = pathlib.Path(spec['path'].format(task=task, Task=task.capitalize())); "
    "path.parent.mkdir(parents=True, exist_ok=True); "
    "path.write_text(spec['text'].format(task=task, Task=task.capitalize())); "
    "done = subprocess.run([a.format(task=task, Task=task.capitalize()) for a in spec['run']]); "
    "sys.exit(done.returncode)"
)])  # fmt: skip
TASKS = ("alpha", "beta")


def _rustup_cargo() -> bool:
    cargo = shutil.which("cargo")
    return cargo is not None and (HOME / ".rustup").is_dir() and ".cargo" in cargo


def _imm_run(repo: Path, spec: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imm_action", "run", "init", "--repo", str(repo),
         "--executor", EXECUTOR],
        env={**os.environ, "TEST_TOOLCHAIN": json.dumps(spec),
             "IMM_EXECUTOR_ENV": "TEST_TOOLCHAIN"},
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip


def _land_every_task(
    root: Path,
    files: dict[str, str],
    checks: dict[str, str],
    scopes: dict[str, list[str]],
    spec: dict[str, object],
) -> None:
    """A batch of TASKS, each judged by its check, whose executor writes and runs what `spec`
    says: every task lands."""
    repo = make_project(root, {task: [] for task in TASKS}, checks=checks, scopes=scopes,
                        extra_files=files)  # fmt: skip
    done = _imm_run(repo, spec)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    states = {c.task_id: str(c.state) for c in current(repo).state.children}
    assert states == dict.fromkeys(TASKS, "integrated"), said


def _lockfile(folder: Path, manifest: str) -> str:
    """The lockfile this cargo writes for `manifest` (no dependency: no network)."""
    (folder / "src").mkdir(parents=True)
    (folder / "Cargo.toml").write_text(manifest)
    (folder / "src" / "lib.rs").write_text("")
    subprocess.run(["cargo", "generate-lockfile", "--offline"], cwd=folder, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    return (folder / "Cargo.lock").read_text()


RUST_TEST = "#[test]\nfn {task}_adds() {{ assert_eq!(calc::add(2, 2), 4); }}\n"


@pytest.mark.skipif(not _rustup_cargo(), reason="no cargo through rustup on this machine")
def test_a_rust_crate_through_rustup_lands_every_honest_task(tmp_path: Path) -> None:
    """`rustup could not choose a version of cargo to run`: lane code got a fresh HOME and no
    RUSTUP_HOME, so every cargo failed, in executors and checks alike."""
    manifest = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
    files = {
        "Cargo.toml": manifest,
        "Cargo.lock": _lockfile(tmp_path / "lock", manifest),
        "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
        ".gitignore": "target/\n",
        ".github/imm.yml": "branch_checks:\n  - name: suite\n    command: cargo test -q\n",
    }
    checks = {t: descriptor(["test", "-q", "--test", t], executable="cargo", timeout_ms=300_000)
              for t in TASKS}  # fmt: skip
    scopes = {t: [f"tests/{t}.rs"] for t in TASKS}
    spec = {"path": "tests/{task}.rs", "text": RUST_TEST,
            "run": ["cargo", "test", "-q", "--test", "{task}"]}  # fmt: skip
    _land_every_task(tmp_path / "r", files, checks, scopes, spec)


POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>calc</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency><groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter</artifactId>
      <version>5.10.2</version><scope>test</scope></dependency>
  </dependencies>
  <build><plugins>
    <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.11.0</version></plugin>
    <plugin><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version>
      <configuration><forkCount>0</forkCount></configuration></plugin>
    <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
  </plugins></build>
</project>
"""
JAVA_TEST = (
    "package demo;\nimport org.junit.jupiter.api.Test;\n"
    "import static org.junit.jupiter.api.Assertions.assertEquals;\n"
    "class {Task}Test {{ @Test void adds() {{ assertEquals(4, Calc.add(2, 2)); }} }}\n"
)
# what an offline build of POM needs in the local repository
_MAVEN_NEEDS = (
    "org/apache/maven/plugins/maven-surefire-plugin/3.2.5",
    "org/apache/maven/surefire/surefire-junit-platform/3.2.5",
    "org/junit/jupiter/junit-jupiter/5.10.2",
)


def _offline_maven() -> bool:
    repository = HOME / ".m2" / "repository"
    return shutil.which("mvn") is not None and all((repository / p).is_dir() for p in _MAVEN_NEEDS)


@pytest.mark.skipif(not _offline_maven(), reason="no mvn with a filled ~/.m2 on this machine")
def test_an_offline_maven_project_lands_every_honest_task(tmp_path: Path) -> None:
    """`~/.m2` was hidden, so an offline build found no plugin; `sandbox_expose` copied it
    into every lane's home (426 MB, 2.5 s a lane)."""
    files = {
        "pom.xml": POM,
        # a JVM that starts fast: the suite runs about ten builds, under load
        ".mvn/jvm.config": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto\n",
        "src/main/java/demo/Calc.java":
            "package demo;\npublic class Calc { public static int add(int a, int b) "
            "{ return a + b; } }\n",
        ".gitignore": "target/\n",
        ".github/imm.yml": "branch_checks:\n  - name: suite\n    command: mvn -o -q test\n",
    }  # fmt: skip
    checks = {t: descriptor(["-o", "-q", "test", f"-Dtest={t.capitalize()}Test"],
                            executable="mvn", timeout_ms=300_000) for t in TASKS}  # fmt: skip
    scopes = {t: [f"src/test/java/demo/{t.capitalize()}Test.java"] for t in TASKS}
    spec = {"path": "src/test/java/demo/{Task}Test.java", "text": JAVA_TEST,
            "run": ["mvn", "-o", "-q", "test", "-Dtest={Task}Test"]}  # fmt: skip
    _land_every_task(tmp_path / "r", files, checks, scopes, spec)
