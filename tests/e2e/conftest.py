"""E2E fixtures: every test here runs the shipped workflows with act (marked `e2e`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.act_world import TOKEN, ActWorld
from tests.fake_github import FakeGitHub
from tests.git_http_remote import GitHttpRemote


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def act_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """act's HOME for the session: its tool cache keeps the action's installed venv, so the
    action installs imm once per session, like a self-hosted runner. The tool cache is one for
    all of the session's test processes (their common temporary folder): the install step
    locks it as jobs on one runner share it, so imm is installed once, not once a process
    (about 4.5 s of CPU each, issue 46). The rest of act's HOME stays each process's own."""
    home = tmp_path_factory.mktemp("act-home")
    session = tmp_path_factory.getbasetemp()
    # under xdist each process's basetemp lies in the session's folder; alone, it is that folder
    # (its parent holds every earlier session's)
    shared = (
        session.parent if os.environ.get("PYTEST_XDIST_WORKER") else session
    ) / "act-tool-cache"
    shared.mkdir(exist_ok=True)
    (home / ".cache" / "act").mkdir(parents=True)
    (home / ".cache" / "act" / "tool_cache").symlink_to(shared, target_is_directory=True)
    return home


@pytest.fixture
def world(tmp_path: Path, act_home: Path) -> Iterator[ActWorld]:
    with (
        GitHttpRemote(tmp_path / "git-host", token=TOKEN) as host,
        FakeGitHub(tokens={TOKEN: "github-actions[bot]"}) as github,
    ):
        yield ActWorld(tmp_path / "world", act_home, host, github)
