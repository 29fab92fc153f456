"""GitHub's actions in the files `imm init` writes are pinned by commit at their current
majors, and a rerun of `imm init` moves old pins forward and keeps the user's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from imm_action.scaffold.pins import PINS
from tests.conftest import make_repo, run_cli

ROOT = Path(__file__).resolve().parents[2]
RELEASE_TAGS = ROOT / "tests" / "vendor" / "action_release_tags"
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")


def _uses_lines(text: str) -> list[tuple[str, str]]:
    found = (USES.match(line) for line in text.splitlines())
    return [(m.group(1), m.group(2).strip()) for m in found if m and "/" in m.group(1)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "hi\n"})


def _shipped() -> list[Path]:
    return [ROOT / "action.yml", *sorted((ROOT / ".github/workflows").glob("imm-*.yml"))]


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.name)
def test_every_github_action_shipped_is_pinned_by_commit_with_its_tag(path: Path) -> None:
    for uses, comment in _uses_lines(path.read_text(encoding="utf-8")):
        if not uses.startswith("actions/"):
            continue
        path, _, ref = uses.partition("@")
        action = "/".join(path.split("/")[:2])  # actions/cache/restore is actions/cache's
        assert ref == PINS[action].sha, uses
        assert comment == f"# {PINS[action].tag}", uses


def _newest_release(action: str) -> tuple[str, str]:
    """The newest `vN.N.N` tag of `action` and the commit it names, from its own tags
    (vendored, `tests/vendor/action_release_tags`)."""
    listing = RELEASE_TAGS / f"{action.replace('/', '+')}.txt"
    named: dict[str, str] = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        oid, _, ref = line.partition("\t")
        named[ref.removeprefix("refs/tags/")] = oid
    releases = [tag for tag in named if re.fullmatch(r"v\d+\.\d+\.\d+", tag)]
    newest = max(releases, key=lambda tag: tuple(int(part) for part in tag[1:].split(".")))
    return newest, named.get(f"{newest}^{{}}", named[newest])  # an annotated tag peels


@pytest.mark.parametrize("action", sorted(PINS))
def test_each_pin_is_the_newest_release_of_its_action_by_the_actions_own_tags(
    action: str,
) -> None:
    tag, commit = _newest_release(action)
    assert (PINS[action].tag, PINS[action].sha) == (tag, commit), (
        f"{action}: pin {tag} at {commit} (tests/vendor/action_release_tags)"
    )


def test_init_writes_every_github_action_pinned_by_commit(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "init", "--repo", str(repo))[0] == 0
    found = []
    for workflow in (repo / ".github/workflows").glob("*.yml"):
        found += _uses_lines(workflow.read_text(encoding="utf-8"))
    checkouts = [(u, c) for u, c in found if u.startswith("actions/checkout@")]
    assert checkouts
    assert set(checkouts) == {(f"actions/checkout@{PINS['actions/checkout'].sha}", "# v7.0.1")}


OLD_WORKFLOW = """\
name: imm check
on:
  pull_request:
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5  # what imm init wrote before
        # keep this note
        with:
          fetch-depth: 0
      - uses: actions/setup-python@0123456789abcdef0123456789abcdef01234567  # v6.9.9 ours
      - uses: actions/checkout@v9
      - uses: imm-action/imm-action@v0
        with:
          command: check
"""


def test_a_rerun_of_init_moves_an_older_major_to_the_pin_and_keeps_the_users_pins(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow = repo / ".github/workflows/imm-check.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(OLD_WORKFLOW, encoding="utf-8")
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 0
    sha = PINS["actions/checkout"].sha
    assert f"uses: actions/checkout@v5 -> actions/checkout@{sha} (v7.0.1)" in out
    text = workflow.read_text(encoding="utf-8")
    assert f"- uses: actions/checkout@{sha}  # v7.0.1\n        # keep this note\n" in text
    assert "actions/setup-python@0123456789abcdef0123456789abcdef01234567  # v6.9.9 ours" in text
    assert "- uses: actions/checkout@v9\n" in text
    steps = YAML(typ="safe").load(text)["jobs"]["check"]["steps"]
    assert steps[0]["with"] == {"fetch-depth": 0}


def test_init_run_twice_over_pinned_workflows_changes_nothing_the_second_time(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "init", "--repo", str(repo))[0] == 0
    before = {p: p.read_bytes() for p in (repo / ".github").rglob("*.yml")}
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 0
    assert out == ""
    assert {p: p.read_bytes() for p in (repo / ".github").rglob("*.yml")} == before
    assert run_cli(capsys, "init", "--repo", str(repo), "--check")[0] == 0
