"""Generated initiatives for benchmarks: layered DAGs with realistic, partly overlapping scopes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DESCRIPTOR = json.dumps(
    {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": ["-m", "pytest", "-q"], "timeout_ms": 60000},
    }
)


@dataclass(frozen=True)
class GeneratedInitiative:
    dependencies: dict[str, list[str]]
    scopes: dict[str, list[str]]


def feature_initiative(tasks: int, seed: int = 7) -> GeneratedInitiative:
    """How large initiatives look: features of 5-40 tasks, each a small layered DAG inside its
    own folder (some tasks share a sub-folder, so they conflict); one in twenty tasks also needs
    a task of the platform feature, and one in fifty touches a shared registry file."""
    rng = random.Random(seed)
    names = [f"t{index:05d}" for index in range(tasks)]
    rng.shuffle(names)  # ids must not be in dependency order
    dependencies: dict[str, list[str]] = {}
    scopes: dict[str, list[str]] = {}
    platform: list[str] = []
    cursor = 0
    feature = 0
    while cursor < tasks:
        size = min(rng.randint(5, 40), tasks - cursor)
        members = names[cursor : cursor + size]
        cursor += size
        parts = max(1, size // 2)
        for position, task in enumerate(members):
            earlier = members[max(0, position - 6) : position]
            needs = (
                set(rng.sample(earlier, k=min(len(earlier), rng.randint(1, 2))))
                if earlier
                else set()
            )
            if platform and feature and rng.random() < 0.05:
                needs.add(rng.choice(platform))
            dependencies[task] = sorted(needs)
            scope = [
                f"src/f{feature:04d}/p{rng.randrange(parts):02d}/**",
                f"tests/f{feature:04d}/test_{task}.py",
            ]
            if rng.random() < 0.02:
                scope.append("src/registry.py")
            scopes[task] = scope
        if feature == 0:
            platform = members
        feature += 1
    return GeneratedInitiative(dependencies, scopes)


def write_initiative(root: Path, slug: str, tasks: int) -> Path:
    generated = feature_initiative(tasks)
    graph, scope = generated.dependencies, generated.scopes
    plans = root / "docs" / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    (root / "docs" / "initiatives").mkdir(parents=True, exist_ok=True)
    lines = [f"# Initiative {slug}", ""]
    for task, needs in sorted(graph.items()):
        lines += [f"## s-{task}: {task}", "Tasks:", f"- {task}"]
        if needs:
            lines.append("Blocked by: " + ", ".join(needs))
        intent = {
            "contract": "assurance_kernel/task_intent/v1",
            "task_id": task,
            "goal": f"Implement {task}",
            "acceptance": [{"id": "tests", "assertion": "Tests pass.", "verification": DESCRIPTOR}],
            "scope_hint": scope[task],
            "risk": "routine",
            "revision": 1,
            "owner": "user",
        }
        (plans / f"{task}.intent.json").write_text(json.dumps(intent, indent=2) + "\n")
    (root / "docs" / "initiatives" / f"{slug}.md").write_text("\n".join(lines) + "\n")
    env_args = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", *env_args, "commit", "-qm", "initiative"], cwd=root, check=True)
    return root


def command_check(command: Mapping[str, object], reads: Sequence[str] | None = None) -> str:
    """A verification descriptor (its JSON text) running `command`; `reads`: the paths it
    declares its result depends on (a move changing none of them carries its pass over)."""
    descriptor: dict[str, object] = {
        "contract": "assurance_kernel/verification_descriptor/v2", "command": command
    }  # fmt: skip
    if reads is not None:
        descriptor["reads"] = list(reads)
    return json.dumps(descriptor)


def own_check(
    task: str, first: str, breaker: str | None = None, timeout_ms: int = 60000
) -> dict[str, object]:
    """A task's check of its own (a command for `write_project`): the shell line `first`, then
    the task's file must exist; for a culprit, `breaker`'s file must not (its check fails once
    that task is on the branch)."""
    script = f"{first}; test -e {task}.txt"
    if breaker is not None:
        script += f" && test ! -e {breaker}.txt"
    return {"executable": "sh", "argv": ["-c", script], "timeout_ms": timeout_ms}


def write_project(
    root: Path,
    slug: str,
    graph: Mapping[str, Sequence[str]],
    checks: Mapping[str, Mapping[str, object]],
    *,
    config: str = "",
    files: Mapping[str, str] | None = None,
    reads: Mapping[str, Sequence[str]] | None = None,
    more_checks: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> None:
    """A repository holding one initiative of `graph`'s tasks (task -> the tasks it needs),
    each with an intent whose one acceptance check runs `checks[task]` and whose scope is its
    own `<task>.txt`, with `config` as `.github/imm.yml` and `files` beside them, committed on
    `main` with a pinned identity: what the batch benchmarks run imm on. `reads`: per task,
    the paths its check declares it reads; `more_checks`: per task, commands of further
    acceptance items of its own."""
    (root / "docs/plans").mkdir(parents=True)
    (root / "docs/initiatives").mkdir(parents=True)
    (root / ".github").mkdir()
    (root / ".github/imm.yml").write_text(config)
    lines = ["# bench", ""]
    for task, needs in graph.items():
        lines += [f"## s-{task}: {task}", "Tasks:", f"- {task}"]
        lines += ["Blocked by: " + ", ".join(needs)] if needs else []
        verification = command_check(checks[task], (reads or {}).get(task))
        acceptance = [{"id": "ok", "assertion": "ok", "verification": verification}]
        acceptance += [
            {"id": f"ok{number}", "assertion": "ok", "verification": command_check(command)}
            for number, command in enumerate((more_checks or {}).get(task, ()), start=2)
        ]
        intent = {
            "contract": "assurance_kernel/task_intent/v1", "task_id": task, "goal": f"Do {task}",
            "acceptance": acceptance,
            "scope_hint": [f"{task}.txt"], "risk": "routine", "revision": 1, "owner": "user",
        }  # fmt: skip
        (root / f"docs/plans/{task}.intent.json").write_text(json.dumps(intent))
    (root / f"docs/initiatives/{slug}.md").write_text("\n".join(lines) + "\n")
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", slug]):
        bench_git(root, *args)


# fixed identity and dates: the same project gives the same commits in every run
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def bench_git(root: Path, *args: str, index: str | None = None, stdin: str | None = None) -> str:
    """`git <args>` in `root` with the benchmarks' identity; its output."""
    env = {**os.environ, **GIT_ENV, **({"GIT_INDEX_FILE": index} if index else {})}
    return subprocess.run(
        ["git", *args], cwd=root, env=env, input=stdin, check=True, capture_output=True, text=True
    ).stdout


def scratch_with_repo(prefix: str, log: str) -> tuple[Path, Path, Path]:
    """A fresh scratch folder, its empty `repo/`, and the file `log` in it where checks write
    (open to every user: integration checks may run as another, ADR 0031)."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    scratch.chmod(0o755)
    repo = scratch / "repo"
    repo.mkdir()
    written = scratch / log
    written.touch()
    written.chmod(0o666)
    return scratch, repo, written
