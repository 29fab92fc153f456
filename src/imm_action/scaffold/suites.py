"""The repository's own suite, found for `imm init` (issue 62 #1, ADR 0068): without
`branch_checks`, a lane that breaks a test no task names lands, and later innocent tasks are
blamed for it. So `imm init` writes what it finds as the branch checks — set, not commented
out — with `held_checks: branch`, and says so when it finds none.

Found, each as the command a branch check runs (no shell):

- pytest's config (`[tool.pytest.ini_options]` or pytest among `pyproject.toml`'s words,
  `pytest.ini`, `[tool:pytest]` in `setup.cfg`, `[pytest]` in `tox.ini`), or a `conftest.py`:
  `python3 -m pytest -q`; else `test_*.py` files under `tests/`: unittest's discovery;
- `package.json`'s `test` script (not npm's placeholder that exits 1): `npm test`;
- `tox.ini` without pytest's config: `tox`;
- a `Makefile` `test` target: `make test`;
- `go.mod`: `go test ./...`; `Cargo.toml`: `cargo test`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

LOOKED_FOR = (
    "pytest's or unittest's tests, package.json's test script, tox.ini, a Makefile test "
    "target, go.mod, Cargo.toml"
)
_NPM_PLACEHOLDER = "no test specified"


def found_suites(repo: Path) -> list[str]:
    """The repository's own suites, as commands a branch check could run (module docstring),
    in the order listed there."""
    found: list[str] = []
    if _pytest_configured(repo):
        found.append("python3 -m pytest -q")
    elif any((repo / "tests").glob("test_*.py")):
        found.append("python3 -m unittest discover -s tests -q")
    test_script = _npm_test(repo / "package.json")
    if test_script is not None and _NPM_PLACEHOLDER not in test_script:
        found.append("npm test")
    if (repo / "tox.ini").is_file() and not _pytest_configured(repo):
        found.append("tox")
    if re.search(r"^test\s*:", _text(repo / "Makefile"), re.MULTILINE):
        found.append("make test")
    if (repo / "go.mod").is_file():
        found.append("go test ./...")
    if (repo / "Cargo.toml").is_file():
        found.append("cargo test")
    return found


def _pytest_configured(repo: Path) -> bool:
    return (
        "pytest" in _text(repo / "pyproject.toml")
        or (repo / "pytest.ini").is_file()
        or "[tool:pytest]" in _text(repo / "setup.cfg")
        or "[pytest]" in _text(repo / "tox.ini")
        or (repo / "conftest.py").is_file()
    )


def _npm_test(package: Path) -> str | None:
    try:
        scripts = json.loads(_text(package) or "{}").get("scripts") or {}
    except (ValueError, AttributeError):
        return None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return test if isinstance(test, str) and test.strip() else None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# The registries a repository installs from, by the files that say what it installs (issue 60):
# what `imm init` lists in `check_network` for `check_setup` and the checks.
_REGISTRIES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
      "poetry.lock", "uv.lock", "Pipfile.lock", "tox.ini"), ("pypi.org", "files.pythonhosted.org")),
    (("package.json",), ("registry.npmjs.org",)),
    (("Cargo.toml",), ("index.crates.io", "static.crates.io")),
    (("go.mod",), ("proxy.golang.org", "sum.golang.org")),
    (("pom.xml",), ("repo.maven.apache.org",)),
    (("build.gradle", "build.gradle.kts"), ("services.gradle.org", "plugins.gradle.org",
                                            "repo.maven.apache.org")),
    (("Gemfile",), ("rubygems.org", "index.rubygems.org")),
)  # fmt: skip
# The hosts the executors imm's recipes run reach: Claude Code (its API, and its installer's
# script and downloads) and Codex (its API)
AGENT_HOSTS = ("api.anthropic.com", "claude.ai", "storage.googleapis.com", "api.openai.com")


def found_registries(repo: Path) -> list[str]:
    """The package registries the repository's files name an installer of, each once."""
    found: list[str] = []
    for files, hosts in _REGISTRIES:
        if any((repo / name).is_file() for name in files):
            found += [host for host in hosts if host not in found]
    return found
