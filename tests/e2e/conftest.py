"""E2E fixtures: every test here runs the shipped workflows with act (marked `e2e`)."""

from __future__ import annotations

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
    action installs imm once per session, like a self-hosted runner."""
    return tmp_path_factory.mktemp("act-home")


@pytest.fixture
def world(tmp_path: Path, act_home: Path) -> Iterator[ActWorld]:
    with (
        GitHttpRemote(tmp_path / "git-host", token=TOKEN) as host,
        FakeGitHub(tokens={TOKEN: "github-actions[bot]"}) as github,
    ):
        yield ActWorld(tmp_path / "world", act_home, host, github)
