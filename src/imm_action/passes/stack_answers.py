"""Where a stack's check results come from: run by this pass's verifier, found in the result
cache (what `imm run`'s background worker or an earlier pass ran), or owed to verify jobs
(decision 0054) — each an `Ask` for `integrate.stack.judge_stack`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imm_action.integrate.flakes import NO_FLAKES, FlakeRules
from imm_action.integrate.shards import DEFAULT_CHECK_MS
from imm_action.integrate.stack import (
    Ask,
    Probe,
    StackJudgement,
    StackLevel,
    judge_stack,
    united_checks,
)
from imm_action.model.outcome import CheckResult
from imm_action.model.shard import OwedCheck
from imm_action.verify.checks import Check, TreeJob, TreeRerun, Verifier
from imm_action.verify.result_cache import ResultCache


def counted(ask: Ask, used: dict[tuple[int, str, int], CheckResult]) -> Ask:
    """`ask`, keeping every answer it gave (what the judgement used, for the true counts)."""

    def counting(probes: Sequence[Probe]) -> Mapping[tuple[int, str], CheckResult] | None:
        answers = ask(probes)
        if answers is not None:
            used.update(((p.level, p.check.digest, p.again), answers[(p.level, p.check.digest)])
                        for p in probes)  # fmt: skip
        return answers

    return counting


def running(verifier: Verifier, levels: Sequence[StackLevel]) -> Ask:
    """Probes run by the verifier: every probe's check in one queue its workers pull from."""

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult]:
        found: dict[tuple[int, str], CheckResult] = {}
        reruns = [probe for probe in probes if probe.again]
        if reruns:
            again = verifier.verify_again_queued(
                [TreeRerun(levels[p.level].tree, p.check, p.again, p.alone) for p in reruns]
            )
            found.update(((p.level, p.check.digest), r) for p, r in zip(reruns, again, strict=True))
        by_level: dict[int, list[Check]] = {}
        for probe in probes:
            if not probe.again:
                by_level.setdefault(probe.level, []).append(probe.check)
        order = sorted(by_level)
        jobs = [TreeJob(levels[level].tree, tuple(by_level[level])) for level in order]
        results = verifier.verify_queued(jobs) if jobs else []
        found.update(
            ((level, check.digest), result)
            for level, level_results in zip(order, results, strict=True)
            for check, result in zip(by_level[level], level_results, strict=True)
        )
        return found

    return ask


def cached(cache: ResultCache, levels: Sequence[StackLevel]) -> Ask:
    """Probes answered from the cache alone; None as soon as one was never run."""

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult] | None:
        found: dict[tuple[int, str], CheckResult] = {}
        for probe in probes:
            result = _cached_result(cache, levels, probe)
            if result is None:
                return None
            found[(probe.level, probe.check.digest)] = result
        return found

    return ask


def _cached_result(
    cache: ResultCache, levels: Sequence[StackLevel], probe: Probe
) -> CheckResult | None:
    """A probe's result as the cache knows it: a run on the head afresh (`again`) is only
    ever its own attempt's."""
    tree, digest = levels[probe.level].tree, probe.check.digest
    return cache.get_again(tree, digest, probe.again) if probe.again else cache.get(tree, digest)


def owed_checks(
    levels: Sequence[StackLevel],
    cache: ResultCache,
    reported: Mapping[str, int] | None = None,
    flakes: FlakeRules = NO_FLAKES,
) -> list[OwedCheck]:
    """What judging the whole stack needs next that `cache` does not know: the top's united
    checks, or a bisection's probes — at every level of each open range at once, so one
    fan-out finds each first failing level. [] when the stack is judged from the cache, or
    when only reruns are owed. Reruns (a failure's confirmation, integrate/flakes.py) stay on
    the integrating runner: here a rerun not known yet is taken to fail as its first run did,
    so the bisection behind it is owed at once. Each is expected to take its last
    recorded duration, else what its lane said it took (`reported`, by check id), else
    DEFAULT_CHECK_MS."""
    said = reported or {}
    owed: dict[tuple[str, str], OwedCheck] = {}

    def ask(probes: Sequence[Probe]) -> dict[tuple[int, str], CheckResult] | None:
        found: dict[tuple[int, str], CheckResult] = {}
        for probe in probes:
            tree, digest = levels[probe.level].tree, probe.check.digest
            result = _cached_result(cache, levels, probe)
            if result is None and probe.again:
                result = cache.get(tree, digest)  # as if it failed again
            if result is not None:
                found[(probe.level, digest)] = result
            elif not probe.again:
                expected = cache.duration_ms(digest)
                if expected is None:
                    expected = said.get(probe.check.check_id, DEFAULT_CHECK_MS)
                owed[(tree, digest)] = OwedCheck(
                    tree=tree, check_id=probe.check.check_id, descriptor_digest=digest,
                    expected_ms=expected,
                )  # fmt: skip
        return found if len(found) == len(probes) else None

    every_level = len(levels) * max(1, len(united_checks(levels)))
    judge_stack(levels, ask, every_level, flakes)
    return list(owed.values())


def judged_prefix(
    levels: Sequence[StackLevel],
    cache: ResultCache,
    workers: int,
    used: dict[tuple[int, str, int], CheckResult],
    flakes: FlakeRules = NO_FLAKES,
) -> tuple[int, StackJudgement | None]:
    """The highest level whose stack (it and every level below) the cache can judge: the top
    the background checks verified, though more lanes ended since."""
    for top in range(len(levels) - 1, 0, -1):  # level 0 is the head, never a top
        level = levels[top]
        if any(cache.get(level.tree, check.digest) is None for check in level.checks):
            continue  # never a top: its own checks did not all run on its tree
        tried: dict[tuple[int, str, int], CheckResult] = {}
        judged = judge_stack(
            levels[: top + 1], counted(cached(cache, levels), tried), workers, flakes
        )
        if judged is not None:
            used.update(tried)
            return top, judged
    return -1, None
