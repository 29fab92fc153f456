"""Initiatives carried by GitHub issues: the tracker protocol read in one GraphQL query per 100
sub-issues, the hand-written Slice form, and errors that name the issue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imm_action.carriers.github import read_github_initiative
from imm_action.errors import InputError
from imm_action.github.client import GitHubClient, RetryBudget, build_github
from tests.fake_github import FakeGitHub

REPO = "acme/widgets"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as github:
        github.add_repo(REPO)
        yield github


def _client(fake: FakeGitHub) -> GitHubClient:
    return GitHubClient(build_github("test-token", fake.url), REPO, RetryBudget(max_wait=0.01))


def _repo_id(fake: FakeGitHub) -> str:
    return str(fake.repo(REPO).id)


def _initiative(fake: FakeGitHub, slug: str, body: str = "") -> int:
    return fake.add_tracker_initiative(REPO, slug, body)


def _task(fake: FakeGitHub, parent: int, slug: str, task_id: str, **overrides: str) -> int:
    return fake.add_tracker_task(REPO, parent, slug, task_id, **overrides)


@pytest.mark.parametrize(("tasks", "requests"), [(100, 1), (250, 3)])
def test_a_tracker_initiative_is_read_with_one_query_per_hundred_tasks(
    fake: FakeGitHub, tasks: int, requests: int
) -> None:
    parent = _initiative(fake, "big")
    numbers = [_task(fake, parent, "big", f"t{index:03d}") for index in range(tasks)]
    for index in range(1, tasks):
        fake.link_blocked_by(REPO, numbers[index], numbers[index - 1])
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "big")
    assert len(located.initiative.tasks) == tasks
    assert located.initiative.tasks[5].blocked_by == ["t004"]
    assert located.initiative.carrier.issue_number == parent  # type: ignore[union-attr]
    assert len(fake.requests_to("POST", "/graphql")) == requests
    assert len(fake.requests) == requests  # and nothing else


def test_an_issue_written_by_hand_carries_slices_in_its_body(fake: FakeGitHub) -> None:
    _initiative(
        fake, "hand", "## a: First\nTasks:\n- one\n\n## b: Second\nTasks:\n- two\nBlocked by: one\n"
    )
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "hand")
    assert [(t.task_id, t.blocked_by) for t in located.initiative.tasks] == [
        ("one", []),
        ("two", ["one"]),
    ]


def test_errors_name_the_issue_and_what_is_wrong(fake: FakeGitHub) -> None:
    parent = _initiative(fake, "bad")
    ok = _task(fake, parent, "bad", "good")
    broken = _task(fake, parent, "bad", "broken", **{"slice-id": ""})
    stranger = int(
        fake.state.new_issue(fake.repo(REPO), "elsewhere", "no markers", "acme")["number"]
    )
    fake.link_blocked_by(REPO, ok, stranger)
    with pytest.raises(InputError) as caught:
        read_github_initiative(_client(fake), REPO, _repo_id(fake), "bad")
    rendered = sorted(problem.render() for problem in caught.value.problems)
    assert rendered == sorted(
        [
            f"issue #{broken}: Task issue lacks the slice-id marker",
            f"issue #{ok}: blocked by #{stranger}, which is not a Task of this initiative",
        ]
    )


def test_a_missing_or_ambiguous_initiative_is_refused(fake: FakeGitHub) -> None:
    with pytest.raises(InputError, match="no Initiative issue carries the markers of 'nope'"):
        read_github_initiative(_client(fake), REPO, _repo_id(fake), "nope")
    first, second = _initiative(fake, "twice"), _initiative(fake, "twice")
    with pytest.raises(InputError, match=f"several issues: #{first}, #{second}"):
        read_github_initiative(_client(fake), REPO, _repo_id(fake), "twice")


def test_a_dependency_cycle_names_the_issues(fake: FakeGitHub) -> None:
    parent = _initiative(fake, "loop")
    a, b = _task(fake, parent, "loop", "a"), _task(fake, parent, "loop", "b")
    fake.link_blocked_by(REPO, a, b)
    fake.link_blocked_by(REPO, b, a)
    with pytest.raises(InputError) as caught:
        read_github_initiative(_client(fake), REPO, _repo_id(fake), "loop")
    assert sorted(p.path for p in caught.value.problems) == [f"issue #{a}", f"issue #{b}"]


def test_imm_plan_reads_a_github_carried_initiative_from_the_actions_environment(
    fake: FakeGitHub,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json
    from pathlib import Path

    from tests.conftest import initiative_files, make_repo, run_cli

    files = initiative_files("gh", {"a": [], "b": ["a"]})
    del files["docs/initiatives/gh.md"]
    repo = make_repo(Path(str(tmp_path)) / "r", files)
    parent = _initiative(fake, "gh")
    first = _task(fake, parent, "gh", "a")
    fake.link_blocked_by(REPO, _task(fake, parent, "gh", "b"), first)
    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO}
    environment |= {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY_ID": _repo_id(fake)}
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    code, out, _ = run_cli(capsys, "plan", "gh", "--repo", str(repo))
    plan = json.loads(out)
    assert code == 0
    assert plan["carrier"] == {"kind": "github", "issue_number": parent}
    assert plan["order"] == ["a", "b"]
