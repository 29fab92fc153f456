"""Initiatives carried by GitHub issues: the tracker protocol read in one GraphQL query per 100
sub-issues, the hand-written Slice form, and errors that name the issue."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imm_action.carriers.github import GitHubSource, issue_reference, read_github_initiative
from imm_action.errors import InputError
from imm_action.github.client import GitHubClient
from imm_action.github.transport import RetryBudget, build_github
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


def _big(fake: FakeGitHub, slug: str, tasks: int) -> int:
    parent = _initiative(fake, slug)
    numbers = [_task(fake, parent, slug, f"t{index:03d}") for index in range(tasks)]
    for index in range(1, tasks):
        fake.link_blocked_by(REPO, numbers[index], numbers[index - 1])
    return parent


@pytest.mark.parametrize(("tasks", "requests"), [(100, 1), (250, 3)])
def test_a_tracker_issue_known_by_number_is_read_with_one_query_per_hundred_tasks(
    fake: FakeGitHub, tasks: int, requests: int
) -> None:
    parent = _big(fake, "big", tasks)
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "big", parent)
    assert len(located.initiative.tasks) == tasks
    assert located.initiative.tasks[5].blocked_by == ["t004"]
    assert located.initiative.tasks[-1].blocked_by == [f"t{tasks - 2:03d}"]
    assert located.initiative.carrier.issue == parent
    assert len(fake.requests_to("POST", "/graphql")) == requests
    assert len(fake.requests) == requests  # and nothing else


@pytest.mark.parametrize(("tasks", "requests"), [(100, 2), (250, 4)])
def test_a_tracker_issue_found_by_search_costs_one_query_more(
    fake: FakeGitHub, tasks: int, requests: int
) -> None:
    _big(fake, "big", tasks)
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "big")
    assert len(located.initiative.tasks) == tasks
    assert len(fake.requests) == requests


def test_a_tracker_issue_search_has_not_indexed_yet_is_found_by_listing_newest_first(
    fake: FakeGitHub,
) -> None:
    parent = _big(fake, "fresh", 3)
    fake.hide_from_search(REPO, parent)
    for index in range(150):  # newer issues to page past: the tracker is on the second page
        fake.state.new_issue(fake.repo(REPO), f"noise {index}", "nothing here", "acme")
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "fresh")
    assert located.initiative.carrier.issue == parent
    assert [task.task_id for task in located.initiative.tasks] == ["t000", "t001", "t002"]
    assert len(fake.requests) == 4  # search, two listing pages, the read


def test_a_tracker_issue_search_has_not_indexed_yet_is_read_by_its_number(
    fake: FakeGitHub,
) -> None:
    parent = _big(fake, "fresh", 3)
    fake.hide_from_search(REPO, parent)
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "fresh", parent)
    assert len(located.initiative.tasks) == 3
    assert len(fake.requests) == 1


def test_a_task_with_more_than_a_hundred_blockers_is_read_completely(fake: FakeGitHub) -> None:
    parent = _initiative(fake, "wide")
    blockers = [f"b{index:03d}" for index in range(120)]
    numbers = [_task(fake, parent, "wide", task) for task in blockers]
    last = _task(fake, parent, "wide", "last")
    for number in numbers:
        fake.link_blocked_by(REPO, last, number)
    located = read_github_initiative(_client(fake), REPO, _repo_id(fake), "wide", parent)
    assert sorted(located.initiative.tasks[-1].blocked_by) == blockers
    assert len(fake.requests) == 3  # sub-issues 1-100, 101-121, the last task's blockers 101-120


def test_an_issue_number_input_names_the_initiative_it_carries(fake: FakeGitHub) -> None:
    parent = _big(fake, "named", 2)
    other = int(fake.state.new_issue(fake.repo(REPO), "plain", "no markers", "acme")["number"])
    source = GitHubSource(_client(fake), REPO, _repo_id(fake))
    assert issue_reference(f"#{parent}") == parent
    assert issue_reference("named") is None
    assert source.slug_of(f"#{parent}") == "named"
    asked = len(fake.requests)
    assert len(source.read("named").initiative.tasks) == 2
    assert len(fake.requests) == asked  # the issue read to name the slug was kept
    assert source.slug_of("named") == "named"
    with pytest.raises(InputError, match=f"issue #{other}: is not an Initiative issue"):
        source.slug_of(f"#{other}")


def test_a_number_that_is_not_the_initiatives_tracker_is_refused(fake: FakeGitHub) -> None:
    _big(fake, "one", 1)
    other = _big(fake, "two", 1)
    with pytest.raises(InputError, match=f"issue #{other}: does not carry the Initiative markers"):
        read_github_initiative(_client(fake), REPO, _repo_id(fake), "one", other)


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


def test_a_graphql_error_exits_2_with_githubs_message_and_no_crash_log(
    fake: FakeGitHub,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pathlib import Path

    from tests.conftest import initiative_files, make_repo, run_cli

    files = initiative_files("gh", {"a": []})
    del files["docs/initiatives/gh.md"]
    repo = make_repo(Path(str(tmp_path)) / "r", files)
    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": "acme/gone"}
    environment |= {"GITHUB_API_URL": fake.url, "RUNNER_TEMP": str(tmp_path)}
    environment |= {"GITHUB_REPOSITORY_ID": "1"}  # as in Actions: the query is what fails
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    code, _, err = run_cli(capsys, "plan", "gh", "--repo", str(repo))
    assert code == 2
    assert err.strip() == (
        "imm plan: GitHub refused the GraphQL query ListIssues: "
        "Could not resolve to a Repository with the name 'acme/gone'."
    )
    assert not list(Path(str(tmp_path)).glob("imm-*.log"))


def test_imm_plan_takes_the_initiative_as_the_number_of_its_issue(
    fake: FakeGitHub,
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json
    from pathlib import Path

    from tests.conftest import initiative_files, make_repo, run_cli

    files = initiative_files("gh", {"a": []})
    del files["docs/initiatives/gh.md"]
    repo = make_repo(Path(str(tmp_path)) / "r", files)
    parent = _initiative(fake, "gh")
    _task(fake, parent, "gh", "a")
    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO}
    environment |= {"GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY_ID": _repo_id(fake)}
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    code, out, _ = run_cli(capsys, "plan", f"#{parent}", "--repo", str(repo))
    assert code == 0
    assert json.loads(out)["initiative"] == "gh"
    assert len(fake.requests) == 1  # the issue read once: to name the slug and for the plan


def test_outside_actions_the_repository_id_is_asked_of_the_api_once(fake: FakeGitHub) -> None:
    """Issue 24 #7: used locally against GitHub there is no GITHUB_REPOSITORY_ID."""
    _big(fake, "local", 2)
    client = _client(fake)
    source = GitHubSource(client, REPO, "", client.repository_id)
    assert len(source.read("local").initiative.tasks) == 2
    assert source.repository_id == _repo_id(fake)
    asked = [r for r in fake.requests if r.path == f"/repos/{REPO}"]
    assert len(asked) == 1


def test_outside_actions_an_unknown_repository_exits_2_naming_it(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from tests.conftest import initiative_files, make_repo, run_cli

    files = initiative_files("gh", {"a": []})
    del files["docs/initiatives/gh.md"]
    repo = make_repo(tmp_path / "r", files)
    monkeypatch.delenv("GITHUB_REPOSITORY_ID", raising=False)
    environment = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": "acme/gone"}
    for key, value in {**environment, "GITHUB_API_URL": fake.url}.items():
        monkeypatch.setenv(key, value)
    code, _, err = run_cli(capsys, "plan", "gh", "--repo", str(repo))
    assert code == 2
    assert "GitHub has no repository acme/gone this token can see (404)" in err
