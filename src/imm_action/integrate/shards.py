"""Pure: a round's owed checks split into shards for verify jobs, and what the job that moves
the branch accepts of their verdicts (issue 32, decision 0054).

A stack owes the checks the result cache does not know yet (the top's united checks, then a
bisection's probes). When running them on the integrating runner would keep it busy longer
than `after_ms` — by each descriptor's last recorded duration, `DEFAULT_CHECK_MS` for one never
timed — they are split, longest first, into up to `runners` shards, each to the shard that
would end first. A verdict counts only for a (tree, descriptor) its shard owed, in a file of
the round's own run and shard; anything else is refused, and an owed check without an
accepted verdict is a check not yet run — never a pass."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from imm_action.model.outcome import CheckResult
from imm_action.model.shard import (
    DEFAULT_FAN_OUT_SECONDS,
    MAX_SHARD_CHECKS,
    MAX_SHARDS,
    OwedCheck,
    ShardVerdict,
    VerifyRound,
    VerifyShard,
    verdict_artifact,
)
from imm_action.text import plural

DEFAULT_CHECK_MS = 60_000  # a check never timed is assumed to take a minute
FAN_OUT_AFTER_MS = DEFAULT_FAN_OUT_SECONDS * 1000
DEFAULT_VERIFY_RUNNERS = 8
VERIFY_LOSS_LIMIT = 3  # rounds whose verify jobs lost a shard before the runner verifies itself


@dataclass(frozen=True)
class FanOutRules:
    """`runners`: the config's `verify_runners` (None: DEFAULT_VERIFY_RUNNERS; 0: never fan
    out); `workers`: checks at once on the integrating runner."""

    runners: int | None
    workers: int
    after_ms: int = FAN_OUT_AFTER_MS

    @property
    def most_runners(self) -> int:
        return min(MAX_SHARDS, DEFAULT_VERIFY_RUNNERS if self.runners is None else self.runners)


def busy_ms(expected: Sequence[int], workers: int) -> int:
    """How long `workers` pulling the checks longest first from one queue take (the queue of
    verify.check_queue): each check goes to the worker that is free first."""
    ends = [0] * max(1, workers)
    for duration in sorted(expected, reverse=True):
        heapq.heapreplace(ends, ends[0] + duration)
    return max(ends)


def plan_shards(owed: Sequence[OwedCheck], rules: FanOutRules) -> list[VerifyShard]:
    """The shards the owed checks run in; [] to verify them on the integrating runner (fan-out
    off, too little to gain, or more than one round may owe)."""
    if rules.most_runners < 1 or not owed or len(owed) > MAX_SHARD_CHECKS:
        return []
    if busy_ms([check.expected_ms for check in owed], rules.workers) <= rules.after_ms:
        return []
    count = min(rules.most_runners, len(owed))
    # (load, checks, shard): among shards that end alike, the one with fewer checks first, so
    # none stays empty while checks of no known cost remain
    loads: list[tuple[int, int, int]] = [(0, 0, index) for index in range(count)]
    assigned: list[list[OwedCheck]] = [[] for _ in range(count)]
    # longest first, each to the shard that ends first; ties by tree keep a tree's checks
    # together, so a shard checks out fewer trees
    for check in sorted(owed, key=lambda c: (-c.expected_ms, c.tree, c.check_id)):
        load, checks, index = heapq.heappop(loads)
        assigned[index].append(check)
        heapq.heappush(loads, (load + check.expected_ms, checks + 1, index))
    return [VerifyShard(index=index + 1, checks=checks) for index, checks in enumerate(assigned)]


@dataclass(frozen=True)
class AcceptedVerdicts:
    """What the verdict files of a round gave: results by (tree, descriptor digest), the
    shards left with an owed check unanswered, and why each refused file or entry was."""

    results: Mapping[tuple[str, str], CheckResult]
    missing: tuple[int, ...]
    refused: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missing


def accept_verdicts(
    batch_id: str, verify: VerifyRound, files: Mapping[str, bytes]
) -> AcceptedVerdicts:
    """The verdicts of `verify`'s shards among `files` (artifact name -> the verdict file it
    holds), as downloaded from the round's own run. A shard is missing while a check it owed
    has no accepted verdict from it or from a later stage's shard (which runs what a stage 1
    job that died left)."""
    results: dict[tuple[str, str], CheckResult] = {}
    expected = {verdict_artifact(batch_id, verify.run_id, s.index): s for s in verify.shards}
    refused = [
        f"{name}: not a verify job of run {verify.run_id} for batch {batch_id}"
        for name in sorted(files)
        if name not in expected
    ]
    for name, shard in expected.items():
        results.update(
            _shard_results(
                batch_id, verify.run_id, shard, name=name, body=files.get(name), refused=refused
            )
        )
    missing = tuple(
        shard.index
        for shard in verify.shards
        if any((check.tree, check.descriptor_digest) not in results for check in shard.checks)
    )
    return AcceptedVerdicts(results, missing, tuple(refused))


def _shard_results(
    batch_id: str,
    run_id: int,
    shard: VerifyShard,
    *,
    name: str,
    body: bytes | None,
    refused: list[str],
) -> dict[tuple[str, str], CheckResult]:
    if body is None:
        return {}
    try:
        verdict = ShardVerdict.model_validate_json(body)
    except ValidationError as error:
        refused.append(f"{name}: not a verdict file ({plural(error.error_count(), 'problem')})")
        return {}
    if (verdict.batch_id, verdict.run_id, verdict.shard) != (batch_id, run_id, shard.index):
        refused.append(
            f"{name}: names batch {verdict.batch_id}, run {verdict.run_id}, shard {verdict.shard}"
        )
        return {}
    owed = {(check.tree, check.descriptor_digest): check for check in shard.checks}
    found: dict[tuple[str, str], CheckResult] = {}
    for entry in verdict.verdicts:
        key = (entry.tree, entry.descriptor_digest)
        check = owed.get(key)
        if check is None:
            refused.append(
                f"{name}: a verdict for {entry.descriptor_digest[:15]} on tree "
                f"{entry.tree[:12]}, which shard {shard.index} did not owe"
            )
            continue
        # the owed check's id, whatever the file says (results are shown by it)
        found[key] = entry.result.model_copy(update={"check_id": check.check_id})
    return found


def add_stage(
    earlier: VerifyRound | None, shards: Sequence[VerifyShard], top: str, run_id: int, losses: int
) -> VerifyRound:
    """`shards` as the next stage of this run's round (after `earlier`, when it is this run's),
    numbered on from its shards; or as a new round's first stage."""
    if earlier is None or earlier.run_id != run_id:
        return VerifyRound(run_id=run_id, top=top, shards=list(shards), losses=losses)
    stage = earlier.stage + 1
    first = len(earlier.shards) + 1
    added = [
        shard.model_copy(update={"index": first + number, "stage": stage})
        for number, shard in enumerate(shards)
    ]
    return earlier.model_copy(update={"top": top, "shards": [*earlier.shards, *added]})
