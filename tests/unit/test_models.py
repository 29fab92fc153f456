"""File-format models: intent rules and normalisation, descriptors, state invariants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from imm_action.model.descriptor import DescriptorError, parse_descriptor
from imm_action.model.intent import TaskIntent, normalise_scope
from imm_action.model.state import (
    FLAKY_BATCHES,
    BatchRunState,
    ChildState,
    flaky_in_repository,
    flaky_said,
)
from tests.conftest import descriptor, intent


def _intent(**overrides: Any) -> TaskIntent:
    return TaskIntent.model_validate_json(json.dumps({**intent("t1"), **overrides}))


def _errors(**overrides: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        _intent(**overrides)
    return str(caught.value)


def test_a_valid_intent_loads() -> None:
    assert _intent().task_id == "t1"


@pytest.mark.parametrize(
    "entry",
    ["", ".", "*", "**", "**/*", "a\x00b", "a\\b", "/abs", "C:/x", "a/../b", "./a", "a//b", "a/",
     "e\u0301", "x" * 201],
)  # fmt: skip
def test_unsafe_scope_entries_are_refused(entry: str) -> None:
    assert "scope_hint" in _errors(scope_hint=[entry])


def test_scope_is_deduped_sorted_and_pruned_under_literal_entries() -> None:
    scope = ["src/b", "src/a", "src/a/x.py", "src/a/**", "src/b", "lib/*.py", "lib/*.py/deep"]
    assert _intent(scope_hint=scope).scope_hint == ["lib/*.py", "lib/*.py/deep", "src/a", "src/b"]


@given(st.lists(st.sampled_from(["a", "a/b", "a/b/c", "b", "b/*.py", "a/*"]), min_size=1))
def test_scope_normalisation_is_idempotent(entries: list[str]) -> None:
    once = normalise_scope(entries)
    assert normalise_scope(once) == once


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"contract": "other"}, "contract"),
        ({"risk": "high"}, "risk"),
        ({"revision": 0}, "revision"),
        ({"revision": "1"}, "revision"),
        ({"owner": "agent"}, "owner"),
        ({"goal": ""}, "goal"),
        ({"goal": "   "}, "goal"),
        ({"acceptance": []}, "acceptance"),
        ({"task_id": "-bad"}, "task_id"),
        ({"extra": 1}, "extra"),
    ],
)
def test_each_rule_of_the_intent_is_enforced(overrides: dict[str, Any], fragment: str) -> None:
    assert fragment in _errors(**overrides)


def test_acceptance_ids_must_be_unique() -> None:
    item = {"id": "x", "assertion": "a", "verification": descriptor()}
    assert "used twice" in _errors(acceptance=[item, item])


def test_the_content_hash_covers_the_normalised_intent() -> None:
    one = _intent(scope_hint=["b", "a"])
    two = _intent(scope_hint=["a", "b", "a"])
    assert one.content_hash() == two.content_hash()
    assert one.content_hash() != _intent(scope_hint=["a"]).content_hash()


def test_a_v2_descriptor_parses_with_defaults() -> None:
    parsed = parse_descriptor(descriptor(["-m", "pytest"]))
    assert (parsed.command.cwd, parsed.command.argv) == (".", ["-m", "pytest"])


def test_a_v1_descriptor_is_refused_with_the_v2_text_to_use() -> None:
    v1 = json.dumps(
        {"contract": "assurance_kernel/verification_descriptor/v1", "command": "pytest -q tests"}
    )
    with pytest.raises(DescriptorError) as caught:
        parse_descriptor(v1)
    message = str(caught.value)
    assert message.startswith("verification_contract_migration_required")
    suggested = json.loads(message.split("instead: ", 1)[1])
    assert parse_descriptor(json.dumps(suggested)).command.argv == ["-q", "tests"]


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ({"executable": "rm -rf /"}, "executable"),
        ({"executable": "../x"}, "executable"),
        ({"executable": "./../x"}, "executable"),
        ({"executable": "./.git/hooks/x"}, ".git"),
        ({"executable": "x", "argv": ["a\nb"]}, "control"),
        ({"executable": "x", "argv": ["a" * 513]}, "512"),
        ({"executable": "x", "argv": ["a"] * 65}, "argv"),
        ({"executable": "x", "cwd": "../up"}, "cwd"),
        ({"executable": "x", "cwd": ".git"}, ".git"),
        ({"executable": "x", "timeout_ms": 0}, "timeout_ms"),
        ({"executable": "x", "timeout_ms": 600001}, "timeout_ms"),
        ({"executable": "x", "max_output_bytes": 262145}, "max_output_bytes"),
        ({"executable": "x", "shell": True}, "unknown key"),
    ],
)
def test_each_descriptor_rule_is_enforced(command: dict[str, Any], fragment: str) -> None:
    text = json.dumps(
        {"contract": "assurance_kernel/verification_descriptor/v2", "command": command}
    )
    with pytest.raises(DescriptorError, match=fragment):
        parse_descriptor(text)


def test_descriptor_environment_limits_writable_paths() -> None:
    base = {
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "x"},
    }
    ok = {**base, "environment": {"prepare": {"executable": "make"}, "writable_paths": ["build"]}}
    assert parse_descriptor(json.dumps(ok)).environment is not None
    for bad in (["../x"], ["a"] * 33, ["/abs"]):
        with pytest.raises(DescriptorError):
            parse_descriptor(json.dumps({**base, "environment": {"writable_paths": bad}}))


def test_an_oversized_or_non_json_descriptor_is_refused() -> None:
    with pytest.raises(DescriptorError, match="larger than"):
        parse_descriptor(" " * (64 * 1024 + 1))
    with pytest.raises(DescriptorError, match="not JSON"):
        parse_descriptor("{")


OID = "a" * 40
OID2 = "b" * 40
NOW = "2026-12-02T10:00:00.000Z"


def _state(children: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "contract": "imm_action/batch_run_state/v1",
        "batch_id": "batch-x-1",
        "initiative_slug": "x",
        "carrier": {"kind": "local", "path": "docs/initiatives/x.md"},
        "plan_digest": "sha256:" + "0" * 64,
        "base_ref": "main",
        "base_head": OID,
        "branch": "imm/x",
        "authorized_by": "local:tester",
        "confirmation_time": NOW,
        "budget": {"max_children": 1, "qa_failure_limit": 2},
        "max_parallel": 1,
        "batch_state": "running",
        "children": children,
        "commits": [],
        "adopted_heads": [],
        "created_at": NOW,
        "updated_at": NOW,
    }
    data.update(overrides)
    return data


def _child(state: str, **overrides: Any) -> dict[str, Any]:
    lane = {"branch": "imm-lane/x/a", "base_head": OID, "lane_commit": OID2,
            "runner": {"kind": "local", "path": "/tmp/lane", "pid": 1}}  # fmt: skip
    data: dict[str, Any] = {
        "task_id": "a", "slice_id": "s", "blocked_by": [], "state": state, "reason": None,
        "commit": None, "lane": lane, "qa_failures": 0, "attempts": 0,
    }  # fmt: skip
    data.update(overrides)
    return data


def _load(data: dict[str, Any]) -> BatchRunState:
    return BatchRunState.model_validate_json(json.dumps(data))


def test_a_consistent_state_loads_and_keeps_its_field_order() -> None:
    state = _load(
        _state([_child("integrated", commit=OID2)], commits=[OID2], batch_state="completed")
    )
    assert state.children[0].state is ChildState.INTEGRATED
    assert list(state.model_dump(by_alias=True))[:3] == ["contract", "batch_id", "initiative_slug"]


@pytest.mark.parametrize(
    ("children", "overrides", "fragment"),
    [
        ([_child("lane_admitted", lane=None)], {}, "without a lane"),
        ([_child("pending")], {}, "holds a lane"),
        ([_child("integrated")], {}, "without a commit"),
        ([_child("settled", commit=OID2)], {"commits": [OID2]}, "not integrated"),
        ([_child("integrated", commit=OID2)], {}, "missing from commits"),
        ([_child("needs_human")], {}, "without a reason"),
        ([_child("skipped_blocked", lane=None)], {}, "without a reason"),
        ([_child("lane_admitted")], {"batch_state": "failed"}, "in flight"),
        (
            [_child("pending", lane=None, reason="x")],
            {"batch_state": "completed"},
            "not integrated",
        ),
        ([_child("pending", lane=None), _child("pending", lane=None)], {}, "duplicate child a"),
        (
            [_child("pending", lane=None)],
            {"settled_before": [{"task_id": "a", "batch_id": "batch-x-0", "commit": OID}]},
            "task a is both a child and settled by batch-x-0",
        ),
        (
            [_child("integrated", commit=OID2)],
            {
                "commits": [OID2],
                "batch_state": "completed",
                "settled_before": [{"task_id": "b", "batch_id": "batch-x-0", "commit": OID2}],
            },
            "task b is settled by batch-x-0 with a commit of this batch",
        ),
        ([], {}, "children"),
    ],
)
def test_each_state_invariant_names_the_batch_and_child(
    children: list[dict[str, Any]], overrides: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError, match=fragment):
        _load(_state(children, **overrides))


def test_the_repositorys_flaky_record_sums_the_newest_batches_flips() -> None:
    def batch(n: int) -> BatchRunState:
        flips = {"tests/t.py::io": 1, **({"tests/t.py::old": 5} if n == 0 else {})}
        moment = f"2026-01-01T00:00:{n:02d}.000Z"
        child = _child("pending", lane=None)
        return _load(_state([child], batch_id=f"batch-{n:02d}", created_at=moment,
                            updated_at=moment, flaky_tests=flips))  # fmt: skip

    states = [batch(n) for n in range(FLAKY_BATCHES + 1)]
    # the oldest batch, past the newest FLAKY_BATCHES, no longer counts
    assert flaky_in_repository(list(reversed(states))) == {"tests/t.py::io": FLAKY_BATCHES}
    assert flaky_in_repository(states[:2]) == {"tests/t.py::old": 5, "tests/t.py::io": 2}
    assert flaky_in_repository([]) == {}


def test_tests_only_earlier_batches_saw_flip_are_reported_for_the_repository() -> None:
    child = _child("pending", lane=None)
    state = _load(_state([child], flaky_tests={"tests/t.py::io": 2},
                         flaky_before={"tests/t.py::io": 1, "tests/t.py::net": 4}))  # fmt: skip
    assert flaky_said(state) == [
        ("tests/t.py::io", "flipped 2 times in this batch (1 time in this repository's batches "
                           "before it); no lane was blamed for it"),
        ("tests/t.py::net", "did not flip in this batch; flipped 4 times in this repository's "
                            "batches before it, so its failures are confirmed before any lane "
                            "is blamed"),
    ]  # fmt: skip
