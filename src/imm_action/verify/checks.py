"""Running a set of descriptors against a git tree: grouped by environment, cached, parallel."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from imm_action.git.repo import GitRepo
from imm_action.masking import NO_MASK, Masker
from imm_action.model.common import sha256_digest
from imm_action.model.descriptor import DescriptorEnvironment, VerificationDescriptor
from imm_action.model.outcome import CheckResult
from imm_action.plan.glob import scope_covers
from imm_action.verify.check_queue import (
    Fresh,
    Queued,
    QueuedCheck,
    Workers,
    default_workers,
    environment_of,
    longest_first,
    run_queue,
)
from imm_action.verify.check_sandbox import check_sandbox, fresh_view
from imm_action.verify.check_setup import CheckPlace, scratch_folder, unconfined_place
from imm_action.verify.command_run import Sandbox, run_check, run_command
from imm_action.verify.overlays import taken_tree
from imm_action.verify.result_cache import ResultCache
from imm_action.verify.same_run import by_run, leader, served
from imm_action.verify.trees import CheckoutTree


@dataclass(frozen=True)
class Check:
    check_id: str  # "<task_id>:<acceptance id>"
    descriptor: VerificationDescriptor

    @cached_property
    def digest(self) -> str:  # asked for on every pass, for every check of the chain
        return descriptor_digest(self.descriptor)


def descriptor_digest(descriptor: VerificationDescriptor) -> str:
    dumped = descriptor.model_dump(mode="json")
    for later in ("reads", "report"):  # the digest of every descriptor written before them
        if dumped.get(later) is None:
            dumped.pop(later, None)
    return sha256_digest(json.dumps(dumped, sort_keys=True))


@dataclass(frozen=True)
class TreeJob:
    tree: str
    checks: tuple[Check, ...]


class Verifier:
    """Runs checks on trees; a queue of many runs `workers` at a time (`verify_parallel`; by
    default one per core, and more while cores sit idle: check_queue.py)."""

    def __init__(
        self,
        repo: GitRepo,
        cache: ResultCache,
        *,
        path_env: str,
        workers: int | None = None,
        on_result: Callable[[str, CheckResult], None] | None = None,
        mask: Masker = NO_MASK,
        place: CheckPlace | None = None,
    ) -> None:
        self._mask = mask
        self._place = place  # isolation and setup of integration checks; None: neither
        self._repo = repo
        self.cache = cache
        self._path_env = path_env
        self.workers = Workers.fixed(workers) if workers else default_workers()
        self._on_result = on_result
        self._counted = threading.Lock()
        self.runs = 0  # descriptors this verifier ran (a cached result is not a run)
        self._changes: dict[tuple[str, str], tuple[str, ...]] = {}
        self._ahead: list[tuple[threading.Thread, Verifier]] = []
        self.ahead_runs = 0  # of `runs`, those run ahead (`verify_ahead`)

    def verify_queued(self, jobs: Sequence[TreeJob]) -> list[list[CheckResult]]:
        """Results of each job's checks on its tree. What no cache answers goes into one queue,
        longest first (by each descriptor's last recorded duration), pulled by the workers,
        each in a checkout of its own (check_queue.py): a stack's united checks (SPEC §5.4),
        or a bisection's probes on several trees, take about their total over the workers, not
        the longest worker's fixed share. Checks of one run on one tree run once
        (same_run.py)."""
        trees = sorted({job.tree for job in jobs})
        with contextlib.ExitStack() as locks:
            for tree in trees:  # in one order: callers of `verify` hold one lock at a time
                locks.enter_context(self.cache.tree_lock(tree))
            unknown = [(job.tree, check) for job in jobs for check in job.checks
                       if self.known(job.tree, check) is None]  # fmt: skip
            if unknown:
                self._run_queued(_runs_of(unknown))
            return [self._verify(job.tree, list(job.checks), None) for job in jobs]

    def verify_ahead(self, jobs: Sequence[TreeJob]) -> None:
        """`jobs` verified in the background, into the cache, while the caller goes on: work
        it is likely to ask for next. One who asks for those trees meanwhile waits for them
        (their tree locks) and finds their results; a failure here is met again there. Its
        runs count as this verifier's once `wait_ahead` saw them end (`ahead_runs` of them).
        Only where workers allow: it takes one worker fewer than this verifier's, leaving one
        to the caller's own runs, and nothing where only one check may run at once
        (`verify_parallel: 1`: checks that cannot share the machine)."""
        if self.workers.floor < 2:
            return
        ahead = Verifier(self._repo, self.cache, path_env=self._path_env, workers=None,
                         on_result=self._on_result, mask=self._mask, place=self._place)  # fmt: skip
        ahead.workers = Workers(self.workers.floor - 1, self.workers.ceiling - 1)

        def run() -> None:
            unknown = [(job.tree, check.digest) for job in jobs for check in job.checks
                       if self.cache.get(job.tree, check.digest) is None]  # fmt: skip
            with contextlib.suppress(Exception):
                ahead.verify_queued(jobs)
                self.cache.note_ahead(unknown)

        thread = threading.Thread(target=run, name="imm-verify-ahead", daemon=True)
        thread.start()
        self._ahead.append((thread, ahead))

    def wait_ahead(self) -> None:
        """Until what `verify_ahead` started has ended; its runs counted."""
        while self._ahead:
            thread, ahead = self._ahead.pop()
            thread.join()
            with self._counted:
                self.runs += ahead.runs
                self.ahead_runs += ahead.runs

    def known(self, tree: str, check: Check) -> CheckResult | None:
        """`check`'s result on `tree` without running it: cached, served by the run of a check
        of the same run there, or carried over from its last pass (and cached then)."""
        cached = self.cache.get(tree, check.digest)
        if cached is None:
            cached = self.cache.serving(tree, check) or self._carried(tree, check)
            if cached is not None:
                self.cache.put(tree, check.digest, cached)
        return cached

    def verify_again_queued(self, reruns: Sequence[TreeRerun]) -> list[CheckResult]:
        """Each rerun run afresh on its tree, whatever the cache holds (a check's `key`-th
        rerun there: flakes.Rerun), all in one queue the workers pull from: the reruns that
        confirm several failures run side by side (integrate/flakes.py)."""
        unknown = [rerun for rerun in reruns if self._rerun(rerun) is None]
        if unknown:
            self._run_queued(_reruns_of(unknown))
        found: list[CheckResult] = []
        for rerun in reruns:
            result = self._rerun(rerun)
            if result is None:  # (a queue records every item it pulls)
                raise RuntimeError(
                    f"no rerun {rerun.key} of {rerun.check.check_id} on {rerun.tree}"
                )
            found.append(result.model_copy(update={"check_id": rerun.check.check_id}))
        return found

    def _rerun(self, rerun: TreeRerun) -> CheckResult | None:
        return self.cache.get_again(rerun.tree, rerun.check.digest, rerun.key)

    def _run_queued(self, groups: list[_Run]) -> None:
        """Each group's leader run, in one queue; a group's `key`: a rerun, kept as such
        (never the tree's result, nor a run another check's verdict may come from)."""
        place = self._place or unconfined_place(self._path_env)
        prepared = place.prepared(self._repo)
        items = [QueuedCheck(run.tree, leader(run.checks), run.alone) for run in groups]
        served_by = {(item.tree, item.check.digest, item.alone): run for item, run in
                     zip(items, groups, strict=True)}  # fmt: skip

        def record(item: QueuedCheck, raw: CheckResult) -> None:
            run = served_by[(item.tree, item.check.digest, item.alone)]
            self._record(item, raw, run.checks, run.key)

        if isinstance(prepared, CheckResult):
            for item in items:
                record(item, _setup_failed(item.check, prepared))
            return

        def open_sandbox(tree: str, stack: contextlib.ExitStack) -> tuple[Sandbox, Fresh]:
            folder = stack.enter_context(scratch_folder(self._repo))
            checkout = stack.enter_context(taken_tree(self._repo, tree, place.confinement))
            sandbox = check_sandbox(checkout, folder, prepared, place)
            # descriptors are untrusted: one that writes the slot's index taints the slot
            stack.enter_context(checkout.untrusted())
            return sandbox, fresh_view(checkout, tree, folder, prepared, place.confinement)

        ordered = longest_first(items, lambda item: self.cache.duration_ms(item.check.digest))
        run_queue(ordered, self.workers, open_sandbox, record, _prepare_failed)

    def _record(
        self, item: QueuedCheck, raw: CheckResult, group: Sequence[Queued], rerun: int = 0
    ) -> dict[str, CheckResult]:
        """A run of `item`'s check, counted, as the verdict of every check of its `group` (one
        run: same_run.py), by digest; a rerun (its key, `rerun`) is kept as such, never the tree's
        result nor a run another check's verdict may come from."""
        result = self._counted_result(item.tree, raw)
        verdicts = {check.digest: served(result, item.check, check) for check in group}
        for digest, verdict in verdicts.items():
            if rerun:
                self.cache.put_again(item.tree, digest, rerun, verdict)
            else:
                self.cache.put(item.tree, digest, verdict)
        if not rerun:
            self.cache.note_run(item.tree, item.check)
        return verdicts

    def _counted_result(self, tree: str, raw: CheckResult) -> CheckResult:
        result = mask_result(self._mask, raw)
        with self._counted:
            self.runs += 1
        if self._on_result is not None:
            self._on_result(tree, result)
        return result

    def _carried(self, tree: str, check: Check) -> CheckResult | None:
        """The check's last pass, when it declares what it reads and nothing of that changed
        between the tree it passed on and `tree` (SPEC §5.4): no run needed."""
        reads = check.descriptor.reads
        last = self.cache.last_pass(check.digest) if reads else None
        if reads is None or last is None:
            return None
        passed_on, result = last
        changed = self._changes.get((passed_on, tree))
        if changed is None:
            changed = tuple(self._repo.changed_paths(passed_on, tree))
            self._changes[(passed_on, tree)] = changed
        if any(scope_covers(reads, path) for path in changed):
            return None
        return result.model_copy(update={"carried_over": True, "duration_ms": 0})

    def verify(
        self, tree: str, checks: Iterable[Check], *, at: CheckoutTree | None = None
    ) -> list[CheckResult]:
        """Results of `checks` on `tree`, run in a slot of the pool, or in `at` (a tree the
        caller holds, checked out at exactly `tree`)."""
        with self.cache.tree_lock(tree):
            return self._verify(tree, list(checks), at)

    def _verify(self, tree: str, checks: list[Check], at: CheckoutTree | None) -> list[CheckResult]:
        # One run per (tree, descriptor), and per run (same_run.py): checks of several tasks
        # that share a descriptor or a command (the project's test suite, say) run it once, and
        # each gets the result under its own id.
        by_digest: dict[str, CheckResult] = {}
        pending: list[Check] = []
        for check in checks:
            cached = self.known(tree, check)
            if cached is not None:
                by_digest[check.digest] = cached
            elif all(check.digest != other.digest for other in pending):
                pending.append(check)
        groups = list(by_run(pending).values())
        by_leader = {leader(group).digest: group for group in groups}
        for environment, group in _by_environment([leader(group) for group in groups]):
            for run_by, raw in self._run_group(tree, environment, group, at):
                by_digest.update(
                    self._record(QueuedCheck(tree, run_by), raw, by_leader[run_by.digest])
                )
        return [
            by_digest[check.digest].model_copy(update={"check_id": check.check_id})
            for check in checks
        ]

    def _run_group(
        self,
        tree: str,
        environment: DescriptorEnvironment,
        group: list[Check],
        at: CheckoutTree | None,
    ) -> list[tuple[Check, CheckResult]]:
        """One environment's checks in one tree (`at`, or a slot of the pool), in the sandbox,
        with what `check_setup` prepared: a lane's checks and the integrator's alike."""
        place = self._place or unconfined_place(self._path_env)
        prepared = place.prepared(self._repo)
        if isinstance(prepared, CheckResult):
            return [(check, _setup_failed(check, prepared)) for check in group]
        with (
            scratch_folder(self._repo) as scratch,
            contextlib.nullcontext(at)
            if at is not None
            else taken_tree(self._repo, tree, place.confinement) as checkout,
        ):
            sandbox = check_sandbox(checkout, scratch, prepared, place)
            fresh = fresh_view(checkout, tree, scratch, prepared, place.confinement)
            # descriptors are untrusted: one that writes the slot's index taints the slot
            with checkout.untrusted():
                return _run_in(sandbox, environment, group, fresh)


def _runs_of(
    checks: Sequence[tuple[str, Check]], key: int = 0, alone: frozenset[str] = frozenset()
) -> list[_Run]:
    """(tree, check) pairs as the runs they take: per tree, its checks of one run together —
    reruns (`key`, `alone`) where asked."""
    by_tree: dict[str, list[Check]] = {}
    for tree, check in checks:
        by_tree.setdefault(tree, []).append(check)
    return [_Run(tree, group, key, alone)
            for tree, found in by_tree.items() for group in by_run(found).values()]  # fmt: skip


@dataclass(frozen=True)
class TreeRerun:
    """A check's rerun on a tree, as the queue runs it: `key` keeps it apart from its other
    runs there (integrate/flakes.Rerun.key); `alone`: the tests to run alone."""

    tree: str
    check: Check
    key: int
    alone: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Run:
    """One run of a queue: the checks of one run on a tree, as a rerun (`key`) or not (0)."""

    tree: str
    checks: list[Check]
    key: int = 0
    alone: frozenset[str] = frozenset()


def _reruns_of(reruns: Sequence[TreeRerun]) -> list[_Run]:
    """Reruns as the runs they take: those of one key and tests alone on a tree, per run."""
    by_kind: dict[tuple[int, frozenset[str]], list[tuple[str, Check]]] = {}
    for rerun in reruns:
        by_kind.setdefault((rerun.key, rerun.alone), []).append((rerun.tree, rerun.check))
    return [run for (key, alone), pairs in by_kind.items() for run in _runs_of(pairs, key, alone)]


def _run_in(
    sandbox: Sandbox, environment: DescriptorEnvironment, group: list[Check], fresh: Fresh
) -> list[tuple[Check, CheckResult]]:
    """The group's checks one after another, each on a fresh view of the tree; a `prepare`
    runs before each (its work would otherwise be what one check leaves the next)."""
    writable = tuple(environment.writable_paths)
    results: list[tuple[Check, CheckResult]] = []
    for position, check in enumerate(group):
        if position:
            fresh()
        if environment.prepare is not None:
            prepared = run_command(sandbox, "prepare", environment.prepare, writable)
            if not prepared.passed:
                results.append((check, _prepare_failed(check, prepared)))
                continue
        results.append((check, run_check(sandbox, check.check_id, check.descriptor, writable)))
    return results


def _setup_failed(check: Queued, setup: CheckResult) -> CheckResult:
    return setup.model_copy(
        update={
            "check_id": check.check_id,
            "passed": False,
            "error": f"check_setup failed: {setup.error or f'exit {setup.exit_code}'}",
        }
    )


def mask_result(mask: Masker, result: CheckResult) -> CheckResult:
    """A check result with every secret value masked in what it quotes."""
    if not mask:
        return result
    return result.model_copy(
        update={
            "output_tail": mask(result.output_tail),
            "error": mask(result.error) if result.error is not None else None,
        }
    )


def _by_environment(checks: list[Check]) -> list[tuple[DescriptorEnvironment, list[Check]]]:
    groups: dict[str, tuple[DescriptorEnvironment, list[Check]]] = {}
    for check in checks:
        key, environment = environment_of(check)
        groups.setdefault(key, (environment, []))[1].append(check)
    return list(groups.values())


def _prepare_failed(check: Queued, prepared: CheckResult) -> CheckResult:
    return prepared.model_copy(
        update={
            "check_id": check.check_id,
            "passed": False,
            "error": "the environment's prepare step failed: "
            f"{prepared.error or prepared.exit_code}",
        }
    )
