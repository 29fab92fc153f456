"""`imm init`: writes the config and workflows; a rerun keeps the user's comments, order and
edits, updates only what imm owns, and says what it changed; `--check` is for CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from imm_action.scaffold.suites import LOOKED_FOR
from tests.conftest import assert_golden, make_repo, run_cli

ACTION = "imm-action/imm-action@v0"

HAND_EDITED_CONFIG = """\
# Our team's settings — keep this comment!
max_parallel: 3   # two runners are always busy with releases

executor: ./scripts/agent --fast   # wraps our agent CLI
qa_failure_limit: 2
barrier_files:
  - poetry.lock   # lockfile: one lane at a time
commands:
  allowed_permission: maintain
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "hi\n"})


def test_init_writes_the_config_and_the_three_workflows(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 0
    assert out.splitlines() == [
        ".github/imm.yml: created",
        f".github/imm.yml: no test suite found ({LOOKED_FOR}): branch_checks is left commented out",
        ".github/imm.yml: lane_network: api.anthropic.com, claude.ai, storage.googleapis.com, "
        "api.openai.com; check_network: none",
        ".github/workflows/imm-batch.yml: created",
        ".github/workflows/imm-command.yml: created",
        ".github/workflows/imm-check.yml: created",
    ]
    batch = (repo / ".github/workflows/imm-batch.yml").read_text(encoding="utf-8")
    assert f"uses: {ACTION}\n" in batch
    assert "uses: ./\n" not in batch


def test_init_ends_with_the_next_steps_to_a_first_batch(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 0
    steps = err.split("next:\n", 1)[1]
    assert "set `executor` in .github/imm.yml" in steps
    assert "imm check" in steps
    assert "/imm run" in steps
    assert "next:" not in run_cli(capsys, "init", "--repo", str(repo))[2]  # said once


def test_init_over_a_hand_edited_config_keeps_it_byte_for_byte(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = repo / ".github" / "imm.yml"
    config.parent.mkdir()
    config.write_text(HAND_EDITED_CONFIG, encoding="utf-8")
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 0
    assert ".github/imm.yml" not in out
    assert config.read_text(encoding="utf-8") == HAND_EDITED_CONFIG


def test_init_updates_only_what_it_owns_in_an_edited_workflow(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "init", "--repo", str(repo), "--action", "imm-action/imm-action@v0.1")
    path = repo / ".github/workflows/imm-batch.yml"
    edited = (
        path.read_text(encoding="utf-8")
        .replace("    runs-on: ubuntu-latest\n", "    runs-on: [self-hosted, big]  # ours\n", 1)
        .replace(
            "      pass:\n        description: Internal;",
            "      legacy:\n        description: Internal;",
            1,
        )
        .replace("name: imm-batch\n", "# Edited by the platform team.\nname: imm-batch\n")
    )
    path.write_text(edited, encoding="utf-8")
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo), "--action", ACTION)
    assert code == 0
    assert_golden("init/update_messages.txt", out)
    assert_golden("init/imm-batch.updated.yml", path.read_text(encoding="utf-8"))


def test_init_check_exits_0_on_an_up_to_date_repository(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "init", "--repo", str(repo))
    code, out, err = run_cli(capsys, "init", "--repo", str(repo), "--check")
    assert (code, out) == (0, "")
    assert "up to date" in err


def test_init_check_exits_1_and_writes_nothing_when_an_update_is_due(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "init", "--repo", str(repo), "--action", "imm-action/imm-action@v0.1")
    before = (repo / ".github/workflows/imm-check.yml").read_text(encoding="utf-8")
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo), "--check", "--action", ACTION)
    assert code == 1
    assert ".github/workflows/imm-check.yml: jobs.check.steps[1].uses:" in out
    assert (repo / ".github/workflows/imm-check.yml").read_text(encoding="utf-8") == before


def test_a_rerun_changes_nothing_after_an_update(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "init", "--repo", str(repo), "--action", "imm-action/imm-action@v0.1")
    run_cli(capsys, "init", "--repo", str(repo), "--action", ACTION)
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo), "--action", ACTION)
    assert (code, out) == (0, "")


def test_a_workflow_that_is_not_yaml_is_reported_with_its_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / ".github/workflows/imm-check.yml"
    path.parent.mkdir(parents=True)
    path.write_text("name: x\njobs: [unclosed\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 2
    assert ".github/workflows/imm-check.yml:" in err


@pytest.mark.parametrize(
    "pin",
    ["imm-action/imm-action@v1", "imm-action/imm-action@0123456789abcdef0123456789abcdef01234567"],
)
def test_a_rerun_keeps_the_users_own_pin_of_the_imm_action_byte_for_byte(
    repo: Path, capsys: pytest.CaptureFixture[str], pin: str
) -> None:
    """Issue 24 #4: rerunning init (the upgrade path) must not turn a pin back into @v0."""
    assert run_cli(capsys, "init", "--repo", str(repo))[0] == 0
    workflows = sorted((repo / ".github/workflows").glob("*.yml"))
    for path in workflows:
        pinned = path.read_text(encoding="utf-8").replace(
            f"uses: {ACTION}\n", f"uses: {pin}  # v1.2.3\n"
        )
        path.write_text(pinned, encoding="utf-8")
    before = {path: path.read_bytes() for path in workflows}
    code, out, _ = run_cli(capsys, "init", "--repo", str(repo))
    assert (code, out) == (0, "")
    assert {path: path.read_bytes() for path in workflows} == before
    assert run_cli(capsys, "init", "--repo", str(repo), "--check")[0] == 0


FOREIGN = """\
name: our own batch job
on:
  push:
    branches: [main]
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: make batch
"""


def test_a_workflow_of_someone_elses_at_an_init_path_is_reported_and_left_alone(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24 #4: never merge imm's dispatch inputs into a foreign file; never skip it
    silently, nor call it up to date."""
    path = repo / ".github/workflows/imm-batch.yml"
    path.parent.mkdir(parents=True)
    path.write_text(FOREIGN, encoding="utf-8")
    code, out, err = run_cli(capsys, "init", "--repo", str(repo))
    assert code == 1
    assert ".github/workflows/imm-batch.yml: not imm's (no step runs the imm action)" in out
    assert "left alone, not imm's: .github/workflows/imm-batch.yml" in err
    assert path.read_text(encoding="utf-8") == FOREIGN
    assert (repo / ".github/workflows/imm-check.yml").is_file()  # the others are written
    code, _, err = run_cli(capsys, "init", "--repo", str(repo), "--check")
    assert code == 1
    assert "not imm's, at imm's paths: .github/workflows/imm-batch.yml" in err


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"},
         ["python3 -m pytest -q"]),
        ({"tests/test_cart.py": "import unittest\n"}, ["python3 -m unittest discover -s tests -q"]),
        ({"package.json": '{"scripts": {"test": "nyc tape test/*.js"}}'}, ["npm test"]),
        ({"Makefile": "build:\n\tcc x.c\ntest: build\n\t./x --test\n"}, ["make test"]),
        ({"tox.ini": "[tox]\nenvlist = py311\n"}, ["tox"]),
        ({"go.mod": "module example.com/x\n"}, ["go test ./..."]),
        ({"Cargo.toml": "[package]\nname = 'x'\n"}, ["cargo test"]),
        ({"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['pytest']\n",
          "Makefile": "test:\n\tpytest\n"}, ["python3 -m pytest -q", "make test"]),
    ],
    ids=["pytest", "unittest", "npm test script", "make test target", "tox", "go", "cargo",
         "two suites"],
)  # fmt: skip
def test_init_sets_the_repositorys_suites_as_branch_checks_with_held_checks_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], found: list[str]
) -> None:
    """Issue 62 #1: without branch checks a lane breaking a test no task names landed, and
    later tasks were blamed. `imm init` sets what it finds (ADR 0068), and says so."""
    root = make_repo(tmp_path / "repo", files)
    code, out, err = run_cli(capsys, "init", "--repo", str(root))
    assert code == 0, err
    assert f"branch_checks: {', '.join(found)}; held_checks: branch" in out
    from imm_action.workspace import load_config

    config = load_config(root).config
    assert config.branch_checks == found
    assert config.held_checks == "branch"


def test_init_in_a_repository_with_no_suite_it_can_find_says_so_and_sets_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_repo(tmp_path / "repo", {"README.md": "hello\n",
                                         "package.json": '{"scripts": {"test": "echo \\"Error: '
                                         'no test specified\\" && exit 1"}}'})  # fmt: skip
    code, out, err = run_cli(capsys, "init", "--repo", str(root))
    assert code == 0, err
    assert "no test suite found (" in out
    assert "branch_checks is left commented out" in out
    from imm_action.workspace import load_config

    assert load_config(root).config.branch_checks == []
    assert "# branch_checks:" in (root / ".github/imm.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "registries"),
    [
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, ["pypi.org", "files.pythonhosted.org"]),
        ({"package.json": "{}"}, ["registry.npmjs.org"]),
        ({"README.md": "hello\n"}, "none"),
    ],
    ids=["python", "npm", "nothing to install"],
)
def test_init_lists_the_agents_hosts_for_executors_and_the_registries_found_for_checks(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    registries: list[str] | str,
) -> None:
    """Issue 60: `lane_network` for the agents the recipes run, `check_network` for the
    registries the repository installs from — set, and said."""
    from imm_action.scaffold.suites import AGENT_HOSTS
    from imm_action.workspace import load_config

    root = make_repo(tmp_path / "repo", files)
    code, out, err = run_cli(capsys, "init", "--repo", str(root))
    assert code == 0, err
    config = load_config(root).config
    assert config.lane_network == list(AGENT_HOSTS)
    assert config.check_network == registries
    shown = ", ".join(registries) if isinstance(registries, list) else registries
    assert f"lane_network: {', '.join(AGENT_HOSTS)}; check_network: {shown}" in out
