"""A link's target is followed through the links of the tree, segment by segment, as the kernel
follows it in a checkout (issue 21 #3): the answer is held to a real filesystem's."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from imm_action.plan.lane_change import ChangedEntry, lane_change_refusal, resolve_link

SEGMENTS = st.sampled_from(["..", ".", "a", "b", "r", "out", "x"])
TARGETS = st.lists(SEGMENTS, min_size=1, max_size=7).map("/".join)
LINK_PATHS = st.sampled_from(["r", "out/r", "out/leak", "a/b/r", "a/l", "out/x"])


def materialise(root: Path, links: dict[str, str]) -> None:
    for path in links:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
    for path, target in links.items():
        os.symlink(target, root / path)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(LINK_PATHS, TARGETS, min_size=1, max_size=4))
def test_where_a_link_leads_is_where_the_filesystem_takes_it(links: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "repo"
        root.mkdir()
        try:
            materialise(root, links)
        except (FileExistsError, NotADirectoryError):
            return  # a link where another needs a folder: no tree can hold both
        real_root = os.path.realpath(root)
        for path in links:
            ours = resolve_link(path, links)
            real = os.path.realpath(root / path)
            inside = real == real_root or real.startswith(real_root + os.sep)
            if ours is not None:
                assert inside, (path, links, real)
                assert real == os.path.normpath(os.path.join(real_root, ours))
            elif inside and _resolvable(root / path):
                assert ".git" in real.lower().split(os.sep), (path, links, real)


def _resolvable(path: Path) -> bool:
    """Whether the kernel resolves it all the way (no loop, no missing folder on the way):
    where it does not, refusing is the only safe answer and ours may differ."""
    try:
        os.path.realpath(path, strict=True)
    except OSError:
        return False
    return True


def test_the_issues_chain_out_of_the_repository_is_refused_with_both_links() -> None:
    entries = [
        ChangedEntry("out/r", "120000", ".."),
        ChangedEntry("out/leak", "120000", "r/out/r/out/../../../etc/passwd"),
    ]
    assert lane_change_refusal(entries, ["out/**"]) == "lane_symlink_outside: out/leak"


def test_a_new_link_that_makes_an_old_one_leave_names_the_old_one() -> None:
    change = [ChangedEntry("out/r", "120000", "..")]
    tree = {"out/r": "..", "out/leak": "r/out/r/out/../../../etc/passwd"}
    assert lane_change_refusal(change, ["out/**"], tree_links=tree) == (
        "lane_symlink_outside: out/leak"
    )


def test_a_link_through_a_link_into_git_is_refused() -> None:
    change = [ChangedEntry("out/g", "120000", "d/config")]
    tree = {"out/g": "d/config", "out/d": "../.git"}
    assert lane_change_refusal(change, ["out/**"], tree_links=tree) == (
        "lane_symlink_outside: out/d, out/g"
    )


def test_a_link_loop_cannot_be_resolved_and_is_refused() -> None:
    assert resolve_link("a", {"a": "b", "b": "a"}) is None


def test_a_link_that_stays_inside_through_other_links_lands() -> None:
    change = [ChangedEntry("out/ok", "120000", "r/a.txt")]
    tree = {"out/ok": "r/a.txt", "out/r": "../docs"}
    assert lane_change_refusal(change, ["out/**"], tree_links=tree) is None
    assert resolve_link("out/ok", tree) == "docs/a.txt"
