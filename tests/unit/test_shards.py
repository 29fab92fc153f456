"""A stack's checks fanned out across runners (issue 32, decision 0054): how owed checks are
split into shards, what a stack owes next, and which verdicts the job that moves the branch
accepts."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from imm_action.integrate.shards import (
    DEFAULT_CHECK_MS,
    FanOutRules,
    accept_verdicts,
    busy_ms,
    plan_shards,
)
from imm_action.integrate.stack import StackLevel
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.outcome import CheckResult
from imm_action.model.shard import (
    OwedCheck,
    ShardVerdict,
    VerifyRound,
    VerifyShard,
    shard_line,
    verdict_artifact,
)
from imm_action.passes.stack_answers import owed_checks
from imm_action.verify.checks import Check
from imm_action.verify.result_cache import ResultCache
from tests.conftest import descriptor

BATCH = "b-1"
RUN = 4242


def _tree(number: int) -> str:
    return f"{number:040x}"


def _owed(number: int, expected_ms: int, tree: int = 1) -> OwedCheck:
    return OwedCheck(
        tree=_tree(tree),
        check_id=f"t{number}:ok",
        descriptor_digest="sha256:" + f"{number:064x}",
        expected_ms=expected_ms,
    )


def _result(check_id: str, passed: bool = True, duration_ms: int = 10) -> CheckResult:
    return CheckResult(
        check_id=check_id, passed=passed, exit_code=0 if passed else 1,
        duration_ms=duration_ms, timed_out=False, output_limited=False, changed_outside=[],
        output_tail="" if passed else "AssertionError", error=None,
    )  # fmt: skip


# -- splitting ------------------------------------------------------------------------------------
def test_checks_that_keep_the_runner_busy_no_longer_than_the_limit_are_not_fanned_out() -> None:
    owed = [_owed(n, 10_000) for n in range(12)]  # 120 s on 2 workers: 60 s
    assert plan_shards(owed, FanOutRules(runners=8, workers=2, after_ms=60_000)) == []


def test_checks_that_would_keep_the_runner_busy_longer_are_split_across_runners() -> None:
    owed = [_owed(n, 10_000) for n in range(32)]  # 320 s on 2 workers: 160 s
    shards = plan_shards(owed, FanOutRules(runners=8, workers=2, after_ms=60_000))
    assert [shard.index for shard in shards] == list(range(1, 9))
    assert [len(shard.checks) for shard in shards] == [4] * 8


def test_verify_runners_zero_never_fans_out() -> None:
    owed = [_owed(n, 600_000) for n in range(32)]
    assert plan_shards(owed, FanOutRules(runners=0, workers=2)) == []


def test_no_more_shards_than_checks() -> None:
    owed = [_owed(n, 600_000) for n in range(3)]
    assert len(plan_shards(owed, FanOutRules(runners=8, workers=1))) == 3


def test_the_longest_checks_go_first_each_to_the_shard_that_ends_first() -> None:
    owed = [_owed(1, 50_000), _owed(2, 40_000), _owed(3, 30_000), _owed(4, 20_000)]
    shards = plan_shards(owed, FanOutRules(runners=2, workers=1, after_ms=1))
    assert [[c.check_id for c in shard.checks] for shard in shards] == [
        ["t1:ok", "t4:ok"],
        ["t2:ok", "t3:ok"],
    ]


@given(
    durations=st.lists(st.integers(0, 100_000), min_size=1, max_size=60),
    runners=st.integers(1, 16),
)
def test_every_owed_check_is_in_exactly_one_shard_and_no_shard_runs_past_the_greedy_bound(
    durations: list[int], runners: int
) -> None:
    owed = [_owed(n, ms) for n, ms in enumerate(durations)]
    shards = plan_shards(owed, FanOutRules(runners=runners, workers=1, after_ms=0))
    if sum(durations) == 0:
        assert shards == []
        return
    placed = [check for shard in shards for check in shard.checks]
    assert sorted(c.check_id for c in placed) == sorted(c.check_id for c in owed)
    assert len(shards) <= runners
    # longest-first greedy: no shard ends later than an even share plus one check
    bound = sum(durations) / len(shards) + max(durations)
    assert all(shard.expected_ms <= bound for shard in shards)


def test_busy_time_is_what_workers_pulling_longest_first_take() -> None:
    assert busy_ms([30, 20, 20, 10], workers=2) == 40
    assert busy_ms([30, 20, 20, 10], workers=1) == 80
    assert busy_ms([], workers=4) == 0


# -- what a stack owes -----------------------------------------------------------------------------
def _check(task: str) -> Check:
    return Check(f"{task}:ok", parse_descriptor(descriptor(["-c", task])))


def _levels(size: int) -> tuple[list[StackLevel], list[Check]]:
    checks = [_check(f"t{level}") for level in range(1, size + 1)]
    levels = [StackLevel(_tree(0), ())] + [
        StackLevel(_tree(level), tuple(checks[:level])) for level in range(1, size + 1)
    ]
    return levels, checks


def test_a_stack_nothing_ran_on_owes_the_united_checks_on_its_top() -> None:
    levels, checks = _levels(4)
    owed = owed_checks(levels, ResultCache())
    assert {(c.tree, c.check_id) for c in owed} == {(_tree(4), c.check_id) for c in checks}
    assert {c.expected_ms for c in owed} == {DEFAULT_CHECK_MS}


def test_a_check_that_failed_on_the_top_is_owed_on_every_level_it_may_first_fail_at() -> None:
    levels, checks = _levels(6)
    cache = ResultCache()
    for check in checks:
        cache.put(_tree(6), check.digest, _result(check.check_id, check is not checks[1]))
    owed = owed_checks(levels, cache)
    # t2's check is judged from level 2 on: the levels 2..5 below the top
    assert sorted((c.tree, c.check_id) for c in owed) == [
        (_tree(level), "t2:ok") for level in range(2, 6)
    ]
    assert {c.expected_ms for c in owed} == {10}  # its duration on the top


def test_a_stack_the_cache_judges_owes_nothing() -> None:
    levels, checks = _levels(3)
    cache = ResultCache()
    for check in checks:
        cache.put(_tree(3), check.digest, _result(check.check_id))
    assert owed_checks(levels, cache) == []


# -- verdicts ------------------------------------------------------------------------------------
def _round(*shards: list[OwedCheck], run_id: int = RUN) -> VerifyRound:
    return VerifyRound(
        run_id=run_id,
        top=_tree(9),
        shards=[VerifyShard(index=n, checks=c) for n, c in enumerate(shards, start=1)],
    )


def _verdict_file(
    shard: int, entries: list[tuple[OwedCheck, bool]], *, run_id: int = RUN, batch: str = BATCH
) -> bytes:
    verdict = {
        "contract": "imm_action/shard_verdict/v1",
        "batch_id": batch,
        "run_id": run_id,
        "shard": shard,
        "verdicts": [
            {
                "tree": check.tree,
                "descriptor_digest": check.descriptor_digest,
                "result": _result(check.check_id, passed).model_dump(mode="json"),
            }
            for check, passed in entries
        ],
    }
    ShardVerdict.model_validate(verdict)  # the file is well formed
    return json.dumps(verdict).encode()


def test_the_verdicts_a_round_owed_are_accepted_failures_too() -> None:
    one, two = _owed(1, 5), _owed(2, 5)
    fanned = _round([one], [two])
    files = {
        verdict_artifact(BATCH, RUN, 1): _verdict_file(1, [(one, True)]),
        verdict_artifact(BATCH, RUN, 2): _verdict_file(2, [(two, False)]),
    }
    accepted = accept_verdicts(BATCH, fanned, files)
    assert accepted.complete
    assert accepted.refused == ()
    assert accepted.results[(one.tree, one.descriptor_digest)].passed
    assert not accepted.results[(two.tree, two.descriptor_digest)].passed


def test_a_shard_without_a_verdict_file_is_missing_and_passes_nothing() -> None:
    one, two = _owed(1, 5), _owed(2, 5)
    fanned = _round([one], [two])
    accepted = accept_verdicts(
        BATCH, fanned, {verdict_artifact(BATCH, RUN, 1): _verdict_file(1, [(one, True)])}
    )
    assert accepted.missing == (2,)
    assert (two.tree, two.descriptor_digest) not in accepted.results


def test_a_verdict_for_another_tree_is_refused() -> None:
    owed = _owed(1, 5, tree=1)
    other = owed.model_copy(update={"tree": _tree(2)})
    accepted = accept_verdicts(
        BATCH, _round([owed]), {verdict_artifact(BATCH, RUN, 1): _verdict_file(1, [(other, True)])}
    )
    assert accepted.results == {}
    assert accepted.missing == (1,)
    assert "did not owe" in accepted.refused[0]


def test_a_verdict_file_naming_another_run_is_refused_even_under_the_right_name() -> None:
    owed = _owed(1, 5)
    files = {verdict_artifact(BATCH, RUN, 1): _verdict_file(1, [(owed, True)], run_id=RUN + 1)}
    accepted = accept_verdicts(BATCH, _round([owed]), files)
    assert accepted.results == {}
    assert accepted.missing == (1,)
    assert f"run {RUN + 1}" in accepted.refused[0]


def test_an_artifact_of_another_run_or_batch_is_refused() -> None:
    owed = _owed(1, 5)
    files = {
        verdict_artifact(BATCH, RUN - 1, 1): _verdict_file(1, [(owed, True)], run_id=RUN - 1),
        verdict_artifact("b-2", RUN, 1): _verdict_file(1, [(owed, True)], batch="b-2"),
    }
    accepted = accept_verdicts(BATCH, _round([owed]), files)
    assert accepted.results == {}
    assert accepted.missing == (1,)
    assert len(accepted.refused) == 2


def test_a_malformed_verdict_file_is_a_check_not_yet_run() -> None:
    owed = _owed(1, 5)
    for body in (b"", b"{", b'{"contract": "imm_action/shard_verdict/v1"}', b"passed"):
        accepted = accept_verdicts(BATCH, _round([owed]), {verdict_artifact(BATCH, RUN, 1): body})
        assert accepted.results == {}, body
        assert accepted.missing == (1,), body
        assert "not a verdict file" in accepted.refused[0]


def test_a_shard_that_answered_part_of_its_checks_keeps_them_and_is_missing() -> None:
    one, two = _owed(1, 5), _owed(2, 5)
    files = {verdict_artifact(BATCH, RUN, 1): _verdict_file(1, [(one, True)])}
    accepted = accept_verdicts(BATCH, _round([one, two]), files)
    assert set(accepted.results) == {(one.tree, one.descriptor_digest)}
    assert accepted.missing == (1,)


def test_an_accepted_result_carries_the_owed_checks_id_whatever_the_file_says() -> None:
    owed = _owed(1, 5)
    body = json.loads(_verdict_file(1, [(owed, True)]))
    body["verdicts"][0]["result"]["check_id"] = "someone-else:ok"
    files = {verdict_artifact(BATCH, RUN, 1): json.dumps(body).encode()}
    accepted = accept_verdicts(BATCH, _round([owed]), files)
    assert accepted.results[(owed.tree, owed.descriptor_digest)].check_id == "t1:ok"


def test_the_status_line_names_the_checks_the_runners_and_the_top() -> None:
    line = shard_line(_round([_owed(1, 12_000)], [_owed(2, 3_000), _owed(3, 4_000)]))
    assert line == (
        f"verifying 3 checks of the stack up to {_tree(9)[:12]} on 2 runners "
        "(the longest shard about 12 s)"
    )
