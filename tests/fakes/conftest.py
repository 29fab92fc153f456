"""What the tests against the fake GitHub share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_github import FakeGitHub

REPO = "acme/widgets"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    """The fake GitHub holding acme/widgets and its batch workflow (a module may define its
    own `fake`, which wins)."""
    with FakeGitHub() as github:
        github.add_repo(REPO)
        github.add_workflow(REPO, "imm-batch.yml")
        yield github
