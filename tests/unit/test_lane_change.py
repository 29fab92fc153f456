"""What a lane commit may change, decided again at integration (pure rules)."""

from __future__ import annotations

from imm_action.plan.lane_change import ChangedEntry, lane_change_refusal

SCOPE = ["src/app", "docs/*.md"]


def _file(path: str) -> ChangedEntry:
    return ChangedEntry(path, "100644")


def test_changes_inside_the_scope_may_land() -> None:
    entries = [_file("src/app/x.py"), _file("docs/a.md"), ChangedEntry("src/app/gone", "000000")]
    assert lane_change_refusal(entries, SCOPE) is None


def test_a_path_outside_the_scope_is_refused_by_name() -> None:
    refusal = lane_change_refusal([_file("src/app/x.py"), _file("EVIL.txt")], SCOPE)
    assert refusal == "lane_outside_scope: EVIL.txt"


def test_a_path_under_a_git_folder_is_refused_even_inside_the_scope() -> None:
    refusal = lane_change_refusal([_file("src/app/.git/config"), _file("src/app/.GIT/x")], SCOPE)
    assert refusal == "lane_git_path: src/app/.GIT/x, src/app/.git/config"


def test_a_gitlink_is_refused() -> None:
    refusal = lane_change_refusal([ChangedEntry("src/app/sub", "160000")], SCOPE)
    assert refusal == "lane_gitlink: src/app/sub"


def test_symlinks_leaving_the_repository_or_into_git_are_refused() -> None:
    for target in ("/etc/passwd", "../../../x", "../../.git/config", ""):
        entry = ChangedEntry("src/app/link", "120000", target)
        assert lane_change_refusal([entry], SCOPE) == "lane_symlink_outside: src/app/link"


def test_a_symlink_inside_the_repository_may_land() -> None:
    entry = ChangedEntry("src/app/link", "120000", "../../docs/a.md")
    assert lane_change_refusal([entry], SCOPE) is None
