"""A check's failing tests run alone (issue 61, ADR 0073): a rerun that confirms a failure runs
the tests that failed, not the suite around them.

pytest, the runner the test ledger knows by its ids (node ids), is asked through its own
means: PYTEST_ADDOPTS loads a plugin imm writes in the check's home, which collects only the
files that hold the tests the list names, keeps only those tests, and says so in a file of its
own (pytest 7 and later; an older one fails to load it, and the trial goes to whole runs).
A check whose runner loads no such plugin (another runner, or pytest behind a tool that drops
the variables) runs whole, and its result says so: nothing that file did not say ran alone
counts as tests run alone."""

from __future__ import annotations

import shlex
from collections.abc import Collection
from pathlib import Path

PLUGIN = "imm_tests_alone"
_PLUGIN_SOURCE = '''"""Written by imm for one check run: keeps the tests $IMM_TESTS_ALONE lists."""
import functools
import os


@functools.lru_cache(maxsize=None)  # (a project's Python may be older than imm's)
def _wanted():
    """The list's path, the tests it names, and the files that hold them (read once)."""
    listed = os.environ.get("IMM_TESTS_ALONE")
    if not listed:
        return None, None, None
    with open(listed, encoding="utf-8") as names:
        wanted = frozenset(line for line in names.read().splitlines() if line)
    return listed, wanted, frozenset(test.split("::", 1)[0] for test in wanted)


def pytest_ignore_collect(collection_path, config):
    # the files that hold none of them are not even collected (collection is most of a
    # fast suite's time)
    _, wanted, files = _wanted()
    if not wanted or collection_path.suffix != ".py" or collection_path.name == "conftest.py":
        return None
    try:
        relative = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None
    return True if relative not in files else None


def pytest_collection_modifyitems(config, items):
    listed, wanted, _ = _wanted()
    if wanted is None:
        return
    kept = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
    with open(listed + ".ran", "w", encoding="utf-8") as ran:
        ran.write("".join(item.nodeid + "\\n" for item in kept))
'''
_LIST = "alone.txt"


def alone_environment(
    folder: Path, tests: Collection[str], pytest_options: str
) -> tuple[tuple[str, str], ...]:
    """The variables that make pytest run only `tests`, the plugin and the list written in
    `folder` (the check's own, fresh for each run); `pytest_options`: PYTEST_ADDOPTS as it is
    without them."""
    plugins = folder / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / f"{PLUGIN}.py").write_text(_PLUGIN_SOURCE, encoding="utf-8")
    (folder / _LIST).write_text("".join(f"{test}\n" for test in sorted(tests)), encoding="utf-8")
    return (
        ("PYTEST_ADDOPTS", f"{pytest_options} -p {shlex.quote(PLUGIN)}"),
        ("PYTHONPATH", str(plugins)),
        ("IMM_TESTS_ALONE", str(folder / _LIST)),
    )


def ran_alone(folder: Path) -> bool:
    """Whether the plugin chose the tests of the run that just ended (kept any or not): False
    when it never ran — the whole check ran."""
    return (folder / f"{_LIST}.ran").is_file()
