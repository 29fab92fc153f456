"""The local markdown carrier: the reference's parsing rules, with file:line in every error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imm_action.carriers.local import parse_local_initiative
from imm_action.errors import InputError

PATH = "docs/initiatives/x.md"
ID_RULE = "ids are 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _tasks(text: str) -> list[tuple[str, str, list[str]]]:
    located = parse_local_initiative(text, "x", PATH)
    return [(t.task_id, t.slice_id, t.blocked_by) for t in located.initiative.tasks]


def _problems(text: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        parse_local_initiative(text, "x", PATH)
    return [problem.render() for problem in caught.value.problems]


def test_slices_tasks_and_dependencies_are_read() -> None:
    text = "## s1: One\nTasks:\n- a\n\n## s2: Two\nTasks:\n- b\nBlocked by: a\n"
    assert _tasks(text) == [("a", "s1", []), ("b", "s2", ["a"])]


def test_blocked_by_may_come_before_tasks() -> None:
    text = "## s1: One\nTasks:\n- a\n## s2: Two\nBlocked by: a\nTasks:\n- b\n"
    assert _tasks(text) == [("a", "s1", []), ("b", "s2", ["a"])]


def test_single_backticks_are_stripped_from_ids_and_star_bullets_count() -> None:
    text = "## s1: One\nTasks:\n* `a`\n## s2: Two\nTasks:\n- `b`\nBlocked by: `a`\n"
    assert _tasks(text) == [("a", "s1", []), ("b", "s2", ["a"])]


def test_crlf_line_endings_read_like_lf() -> None:
    text = "## s1: One\r\nTasks:\r\n- a\r\n## s2: Two\r\nTasks:\r\n- b\r\nBlocked by: a\r\n"
    assert _tasks(text) == [("a", "s1", []), ("b", "s2", ["a"])]


def test_fenced_blocks_are_ignored() -> None:
    text = "## s1: One\nTasks:\n- a\n```\n## s2: Ghost\nTasks:\n- ghost\n```\n"
    assert _tasks(text) == [("a", "s1", [])]


def test_keywords_are_case_insensitive_and_indentation_is_trimmed() -> None:
    text = "  ## s1: One\n  TASKS:\n    - a\n## s2: Two\ntasks :\n- b\nBLOCKED BY : a\n"
    assert _tasks(text) == [("a", "s1", []), ("b", "s2", ["a"])]


def test_a_task_list_ends_at_any_other_text() -> None:
    text = "## s1: One\nTasks:\n- a\nSome prose.\n- not-a-task\n"
    assert _tasks(text) == [("a", "s1", [])]


def test_text_before_the_first_slice_is_ignored() -> None:
    text = "# Title\nTasks:\n- stray\n## s1: One\nTasks:\n- a\n"
    assert _tasks(text) == [("a", "s1", [])]


def test_tasks_come_out_sorted_by_task_id() -> None:
    text = "## s1: One\nTasks:\n- zeta\n## s2: Two\nTasks:\n- alpha\n"
    assert [task for task, _, _ in _tasks(text)] == ["alpha", "zeta"]


def test_a_slice_with_no_task_is_refused_at_its_heading_line() -> None:
    assert _problems("intro\n## s1: One\nno tasks here\n") == [
        f"{PATH}:2: Slice s1 names 0 Tasks; each Slice must name exactly one Task under "
        "'Tasks:' to run as a batch child"
    ]


def test_a_slice_with_two_tasks_is_refused_at_its_heading_line() -> None:
    problems = _problems("## s1: One\nTasks:\n- a\n- b\n")
    assert problems[0].startswith(f"{PATH}:1: Slice s1 names 2 Tasks")


def test_a_file_without_slices_is_refused() -> None:
    assert "declares no Slice" in _problems("# nothing\n")[0]


def test_every_problem_in_the_file_is_reported_at_once() -> None:
    text = (
        "## s1: One\nTasks:\n- a\nBlocked by: ghost, a\n"
        "## s2: Two\nTasks:\n- a\n"
        "## s3: Three\nTasks:\n- bad id!\n"
    )
    assert _problems(text) == [
        f"{PATH}:4: Task a is blocked by 'ghost', which is not a Task of this initiative",
        f"{PATH}:4: Task a is blocked by itself",
        f"{PATH}:7: Task a is declared twice (first at line 3)",
        f"{PATH}:10: task id 'bad id!' is not a valid id: {ID_RULE}",
    ]


def test_a_duplicate_dependency_is_refused() -> None:
    text = "## s1: One\nTasks:\n- a\n## s2: Two\nTasks:\n- b\nBlocked by: a, a\n"
    assert _problems(text) == [f"{PATH}:7: Task b lists dependency a twice"]


def test_a_cycle_names_every_task_on_it_with_its_line() -> None:
    text = "## s1: One\nTasks:\n- a\nBlocked by: b\n## s2: Two\nTasks:\n- b\nBlocked by: a\n"
    problems = _problems(text)
    assert [p.split(": ")[0] for p in problems] == [f"{PATH}:3", f"{PATH}:7"]
    assert all("dependency cycle" in p for p in problems)


@given(st.text(max_size=300))
def test_any_text_parses_or_fails_with_located_problems(text: str) -> None:
    try:
        located = parse_local_initiative(text, "x", PATH)
    except InputError as error:
        assert error.problems
        assert all(problem.path == PATH for problem in error.problems)
    else:
        ids = [task.task_id for task in located.initiative.tasks]
        assert ids == sorted(set(ids))


# -- near misses of the format (issue 24 #5) ----------
def test_a_slice_heading_without_its_id_is_an_error_at_its_own_line_with_a_suggestion() -> None:
    text = "## add: Add\nTasks:\n- add\n## Subtraction\nTasks:\n- sub\n"
    assert _problems(text) == [
        f"{PATH}:4: '## Subtraction' opens a Slice without its id: write "
        "'## <slice_id>: <title>' (did you mean '## subtraction: Subtraction'?)"
    ]


@pytest.mark.parametrize(
    "field", ["Blocked-by: add", "blocked_by: add", "Depends on: add", "Requires: add",
              "Dependencies: add", "BlockedBy: add"],
)  # fmt: skip
def test_a_dependency_written_another_common_way_is_an_error_naming_the_field(field: str) -> None:
    text = f"## add: Add\nTasks:\n- add\n## sub: Sub\nTasks:\n- sub\n{field}\n"
    key = field.split(":", maxsplit=1)[0]
    assert _problems(text) == [f"{PATH}:7: {key}: is not a field; did you mean 'Blocked by:'?"]


def test_a_slice_error_hides_no_other_problem_of_the_file() -> None:
    text = (
        "## s1: One\nTasks:\n- a\n- b\n"
        "## Two\nTasks:\n- c\n"
        "## s3: Three\nTasks:\n- d\nRequires: a\n"
        "## s4: Four\nTasks:\n- bad id!\n"
    )
    assert [p.split(": ")[0] for p in _problems(text)] == [
        f"{PATH}:1",
        f"{PATH}:5",
        f"{PATH}:11",
        f"{PATH}:14",
    ]


PROSE = st.text(
    alphabet=st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=60
).filter(lambda line: ":" not in line and not line.lstrip().startswith(("#", "-", "*", "`")))


@given(st.lists(PROSE, max_size=5))
def test_prose_stays_prose(lines: list[str]) -> None:
    text = "## s1: One\n" + "\n".join(lines) + "\nTasks:\n- a\n\n" + "\n".join(lines) + "\n"
    assert _tasks(text) == [("a", "s1", [])]


@pytest.mark.parametrize("line", ["Note: tasks are small", "Status: draft", "## Notes"])
def test_ordinary_keys_and_headings_stay_prose(line: str) -> None:
    assert _tasks(f"## s1: One\nTasks:\n- a\n{line}\nmore prose\n") == [("a", "s1", [])]


def test_a_heading_with_its_id_and_title_but_no_colon_is_told_the_colon() -> None:
    text = "## add: Add\nTasks:\n- add\n## sub Subtraction built on addition\nTasks:\n- sub\n"
    assert _problems(text) == [
        f"{PATH}:4: '## sub Subtraction built on addition' opens a Slice without its id: write "
        "'## <slice_id>: <title>' (did you mean '## sub: Subtraction built on addition'?)"
    ]


def test_a_heading_without_the_space_after_the_hashes_is_told_at_its_own_line() -> None:
    text = "## add: Add\nTasks:\n- add\n##sub: Subtraction\nTasks:\n- sub\n"
    problems = _problems(text)
    assert problems == [
        f"{PATH}:4: '##sub: Subtraction' needs a space after '##': write '## sub: Subtraction'"
    ]
    assert not any("names 2 Tasks" in problem for problem in problems)
