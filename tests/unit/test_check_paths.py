"""The paths a check names, who may change them, and the order that lets them (pure; issue 42
#2, #3; issue 58)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.model.descriptor import parse_descriptor
from imm_action.plan.check_paths import (
    CheckOrder,
    ScopeCoversCheck,
    check_orders,
    cover_warnings,
    named_paths,
    scope_check_conflicts,
)
from imm_action.plan.dag import kahn_order, transitive_closures
from imm_action.plan.lane_change import ChangedEntry, NamedPath, lane_change_refusal


def _command(argv: list[str], executable: str = "python3", cwd: str = "."):  # type: ignore[no-untyped-def]
    body = {"contract": "assurance_kernel/verification_descriptor/v2",
            "command": {"executable": executable, "argv": argv, "cwd": cwd}}  # fmt: skip
    return parse_descriptor(json.dumps(body)).command


def test_a_check_names_its_files_and_folders_but_not_its_options_code_or_the_root() -> None:
    assert named_paths(_command(["-m", "pytest", "-q", "tests/c", "."])) == ["tests/c"]
    assert named_paths(_command(["-c", "import tests/x"])) == []
    assert named_paths(_command(["-c", "print(1)"], executable="sh")) == []
    assert named_paths(_command(["../check.sh"], executable="sh", cwd="scripts")) == ["check.sh"]
    assert named_paths(_command(["../../x"], cwd="a")) == []  # leaves the repository
    assert named_paths(_command(["check.py", "/tmp/runs"])) == ["check.py"]  # not in the tree


# Tests as their users name them (issue 58 #3): (executable, argv, cwd) -> the paths named.
FORMS = [
    # a pytest node id names its file
    ("python3", ["-m", "pytest", "tests/test_c.py::T"], ".", ["tests/test_c.py"]),
    ("pytest", ["tests/test_c.py::T::test_x[1-2]"], ".", ["tests/test_c.py"]),
    # a dotted module after -m unittest / -m nose2: its file and its package
    ("python3", ["-m", "unittest", "tests.test_c"], ".", ["tests/test_c.py", "tests/test_c"]),
    (
        "python3",
        ["-m", "unittest", "-v", "tests.test_c.TestC.test_x"],
        ".",
        ["tests/test_c.py", "tests/test_c"],
    ),
    (
        "python3",
        ["-m", "nose2", "tests.test_c:TestC.test_x"],
        ".",
        ["tests/test_c.py", "tests/test_c"],
    ),
    ("nose2", ["tests.test_c"], ".", ["tests/test_c.py", "tests/test_c"]),
    # ...read from the check's folder
    ("python3", ["-m", "unittest", "test_c"], "pkg", ["pkg/test_c"]),
    ("python3", ["-m", "unittest", "t.test_c"], "pkg", ["pkg/t/test_c.py", "pkg/t/test_c"]),
    # -m pytest with a dotted name (--pyargs): the name as written too
    (
        "python3",
        ["-m", "pytest", "--pyargs", "pkg.tests"],
        ".",
        ["pkg.tests", "pkg/tests.py", "pkg/tests"],
    ),
    # a file given to unittest is a file
    ("python3", ["-m", "unittest", "tests/test_c.py"], ".", ["tests/test_c.py"]),
    # --opt=value where the value reads as a path; an option's value is not a path
    (
        "python3",
        ["-m", "pytest", "--rootdir=sub", "-c=pytest.ini", "tests"],
        ".",
        ["sub", "pytest.ini", "tests"],
    ),
    (
        "npx",
        ["jest", "--config=jest.config.js", "--outputFile=out/r.json"],
        ".",
        ["jest", "jest.config.js", "out/r.json"],
    ),
    (
        "python3",
        ["-m", "pytest", "-k", "not value", "-n", "4", "-p", "no:cacheprovider", "t"],
        ".",
        ["t"],
    ),
    ("pytest", ["--cov=src/pkg", "--cov-report=xml", "-m", "slow", "tests"], ".", ["tests"]),
    ("python3", ["-m", "pytest", "--ignore", "tests/slow", "tests"], ".", ["tests/slow", "tests"]),
    # unittest discover: its start and top folders, never its pattern
    (
        "python3",
        ["-m", "unittest", "discover", "-s", "tests", "-t", ".", "-p", "t_*.py"],
        ".",
        ["tests"],
    ),
    ("python3", ["-m", "unittest", "discover", "tests", "test_*.py", "src"], ".", ["tests", "src"]),
    ("python3", ["-m", "unittest", "discover", "--start-directory=tests"], ".", ["tests"]),
    # node --test F, a glob as the folder before its wildcard
    ("node", ["--test", "test/a.test.js"], ".", ["test/a.test.js"]),
    ("node", ["--test", "--test-reporter", "tap", "test/"], ".", ["test"]),
    ("nyc", ["tape", "test/**/*.js"], ".", ["tape", "test"]),
    # the script a shell or an interpreter runs
    ("sh", ["scripts/test.sh"], ".", ["scripts/test.sh"]),
    ("./scripts/test.sh", ["--fast"], ".", ["scripts/test.sh"]),
    ("python3", ["-W", "error", "tests/run.py"], ".", ["tests/run.py"]),
]


@pytest.mark.parametrize(("executable", "argv", "cwd", "named"), FORMS)
def test_a_check_names_tests_as_their_users_name_them(
    executable: str, argv: list[str], cwd: str, named: list[str]
) -> None:
    assert named_paths(_command(argv, executable=executable, cwd=cwd)) == named


def test_a_scope_covering_a_named_file_or_what_lies_below_a_named_folder_conflicts() -> None:
    named = {"tests/test_c.py": {"c"}, "tests/d": {"d"}}
    scopes = {"c": ["c.txt", "tests/test_c.py"], "s": ["tests/**"], "e": ["tests/d/e.py"],
              "d": ["d.txt"], "x": ["src/**"]}  # fmt: skip
    assert scope_check_conflicts(scopes, named) == [
        ScopeCoversCheck("e", "tests/d", "d"),
        ScopeCoversCheck("s", "tests/d", "d"),
        ScopeCoversCheck("s", "tests/test_c.py", "c"),
    ]


def _change(path: str, *, added: bool = False) -> ChangedEntry:
    return ChangedEntry(path, "100644", added=added)


OWNED = {"tests/c": NamedPath(frozenset({"c"}), frozenset({"c", "up"}))}


@given(st.lists(st.sampled_from(["tests", "c", "x.py", "deep"]), min_size=1, max_size=4))
def test_a_file_below_a_named_folder_is_changed_only_by_its_owner_and_the_tasks_before_it(
    parts: list[str],
) -> None:
    path = "/".join(["tests", "c", *parts])
    refusal = lane_change_refusal([_change(path)], ["**"], check_files=OWNED, task_id="s")
    assert refusal == f"lane_touches_check: {path} (c)"
    for writer in ("c", "up"):
        assert (
            lane_change_refusal([_change(path)], ["**"], check_files=OWNED, task_id=writer) is None
        )


def test_a_new_file_below_a_named_folder_is_not_a_change_to_what_the_check_names() -> None:
    new = _change("tests/c/test_later.py", added=True)
    assert lane_change_refusal([new], ["**"], check_files=OWNED, task_id="later") is None


def test_the_named_path_itself_is_refused_to_others_even_when_the_change_adds_it() -> None:
    made = _change("tests/c", added=True)
    refusal = lane_change_refusal([made], ["**"], check_files=OWNED, task_id="later")
    assert refusal == "lane_touches_check: tests/c (c)"


def test_a_removed_file_below_a_named_folder_is_refused() -> None:
    gone = ChangedEntry("tests/c/test_c.py", "000000")
    refusal = lane_change_refusal([gone], ["**"], check_files=OWNED, task_id="later")
    assert refusal == "lane_touches_check: tests/c/test_c.py (c)"


def test_a_path_two_checks_name_is_changed_only_by_a_task_before_both() -> None:
    named = {"lib": NamedPath(frozenset({"a", "b"}), frozenset({"up"}))}
    assert lane_change_refusal([_change("lib/x.py")], ["**"], check_files=named,
                               task_id="up") is None  # fmt: skip
    refusal = lane_change_refusal([_change("lib/x.py")], ["**"], check_files=named, task_id="a")
    assert refusal == "lane_touches_check: lib/x.py (a, b)"


# -- the order ownership needs (issue 58 #1) -----------------------------------------------------
def test_an_unordered_task_whose_scope_covers_a_named_path_is_ordered_before_its_owner() -> None:
    conflicts = [ScopeCoversCheck("up", "pkg/contrib", "tests")]
    assert check_orders(["tests", "up"], {}, conflicts) == (
        CheckOrder("tests", "up", "pkg/contrib"),
    )


def test_a_task_already_before_the_owner_needs_no_order() -> None:
    conflicts = [ScopeCoversCheck("up", "pkg/contrib", "tests")]
    assert check_orders(["up", "tests"], {"tests": ["up"]}, conflicts) == ()


def test_a_task_after_the_owner_keeps_its_order() -> None:
    conflicts = [ScopeCoversCheck("later", "pkg/contrib", "tests")]
    assert check_orders(["tests", "later"], {"later": ["tests"]}, conflicts) == ()


def test_two_tasks_covering_each_others_named_paths_are_ordered_once() -> None:
    conflicts = [ScopeCoversCheck("a", "tests/test_b.py", "b"),
                 ScopeCoversCheck("b", "tests/test_a.py", "a")]  # fmt: skip
    assert check_orders(["a", "b"], {}, conflicts) == (CheckOrder("a", "b", "tests/test_a.py"),)


@st.composite
def _covering(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]], list[ScopeCoversCheck]]:
    size = draw(st.integers(min_value=2, max_value=8))
    tasks = [f"t{index}" for index in range(size)]
    needs = {task: sorted(draw(st.sets(st.sampled_from(tasks[:index]), max_size=2)))
             if index else [] for index, task in enumerate(tasks)}  # fmt: skip
    pairs = draw(st.lists(st.tuples(st.sampled_from(tasks), st.sampled_from(tasks)), max_size=12))
    conflicts = [ScopeCoversCheck(a, f"{b}/x", b) for a, b in pairs if a != b]
    return tasks, needs, conflicts


@given(drawn=_covering())
def test_the_orders_added_never_close_a_cycle_and_order_every_covering_pair(
    drawn: tuple[list[str], dict[str, list[str]], list[ScopeCoversCheck]],
) -> None:
    tasks, needs, conflicts = drawn
    closures = transitive_closures(kahn_order(needs), needs)
    found = check_orders(tasks, closures, conflicts)
    extended = {task: [*found_needs] for task, found_needs in needs.items()}
    for added in found:
        extended[added.owner].append(added.task)
    after = transitive_closures(kahn_order(extended), extended)  # raises on a cycle
    for conflict in conflicts:
        assert conflict.task in after[conflict.owner] or conflict.owner in after[conflict.task]


def test_a_named_file_covered_by_a_later_task_is_warned_a_named_folder_is_not() -> None:
    file_ = ScopeCoversCheck("later", "tests/test_c.py", "c")
    folder = ScopeCoversCheck("later", "pkg/contrib", "c")
    before = ScopeCoversCheck("up", "pkg/contrib", "c")
    said = cover_warnings([file_, folder, before], {"later": {"c"}, "c": {"up"}})
    assert said == [(file_, file_.after_owner_message())]


def test_a_co_owner_whose_scope_covers_a_path_another_check_names_too_is_ordered_first() -> None:
    """The shape of a test file reviewed by one task and run by another's check as well: the
    reviewer writes it, so it goes first (pluggy's initiative, benchmarks/branch_checks.py)."""
    named = {"testing/test_hooks.py": {"review", "mod"}}
    scopes = {"review": ["testing/test_hooks.py"], "mod": ["src/hooks.py"]}
    conflicts = scope_check_conflicts(scopes, named)
    assert conflicts == [ScopeCoversCheck("review", "testing/test_hooks.py", "mod")]
    found = check_orders(["mod", "review"], {}, conflicts)
    assert found == (CheckOrder("mod", "review", "testing/test_hooks.py"),)
