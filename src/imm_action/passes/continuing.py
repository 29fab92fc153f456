"""Carrying out what `integrate.continuation` decided for a batch that stopped (SPEC §5.7):
a continuation batch on the same branch (the base branch's new commits merged in first, with
one merge-tree commit and no checkout), or a fresh start that archives the old branch first.
Each is one compare-and-swap: the branch, the archive ref, the stopped batch's last state and
the new batch's first state move together or not at all."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from imm_action.errors import ImmError, NeedsHumanError, UsageError
from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, Identity, RefUpdate
from imm_action.integrate import transitions as t
from imm_action.integrate.continuation import (
    REASON_CONTINUED,
    CannotContinue,
    Continue,
    Fresh,
    Stopped,
    StoppedFacts,
    archive_ref,
    changed_intents,
    continued_children,
    decide_stopped,
    kept_commits,
)
from imm_action.integrate.spend import line_spend
from imm_action.integrate.store import StateStore, StoredBatch
from imm_action.integrate.verdict import Verdict, build_report, verdict
from imm_action.model.plan import BatchPlan
from imm_action.model.refs import batch_branch, heads
from imm_action.model.state import (
    STATE_CONTRACT,
    BatchChild,
    BatchRunState,
    BatchState,
    ChildState,
    Continuation,
    SettledTask,
    StateBudget,
)
from imm_action.passes.observe import recorded_head
from imm_action.plan.project import SETTLED_BY
from imm_action.text import plural
from imm_action.verify.result_cache import ResultCache


@dataclass(frozen=True)
class StartPlan:
    """What a new batch starts from: the request's plan and who asked."""

    slug: str
    plan: BatchPlan
    base_ref: str
    base_head: str
    authorized_by: str
    new_batch_id: str
    stopped: Stopped
    retry: str | None  # `imm retry <task>`: only it and what it skipped run again
    committer: Identity = IMM_IDENTITY  # of the base branch's merge into the batch branch
    settled: tuple[SettledTask, ...] = ()  # the plan's already_settled tasks, with commits
    parallel_asked: int | None = None  # the max_parallel the person asked for, if any
    max_cost_usd: float | None = None  # the new batch's cost budget (config or command line)


@dataclass(frozen=True)
class FreshStart:
    """Start anew from the base, moving the branch from `reset_from`, with `also` in the same
    write (the archive ref, the superseded batch's last state)."""

    reset_from: str | None
    also: tuple[RefUpdate, ...]


class Continuing:
    def __init__(
        self,
        refs: RefStore,
        results: ResultCache,
        clock: Callable[[], str],
        log: Callable[[str], None],
    ) -> None:
        self.refs = refs
        self.repo = refs.repo
        self.store = StateStore(refs)
        self.results = results
        self.clock = clock
        self.log = log

    def decide(self, start: StartPlan, branch_head: str | None) -> StoredBatch | FreshStart | None:
        """A continuation batch (written), a fresh start to make, or None: the usual way."""
        batches = self.store.batches_of(start.slug)
        latest = batches[-1] if batches else None
        holds = (
            latest is not None
            and branch_head is not None
            and self.repo.is_ancestor(recorded_head(self.repo, latest.state), branch_head)
        )
        facts = StoppedFacts(
            latest.state if latest else None, branch_head, start.plan.plan_digest, holds
        )
        match decide_stopped(start.stopped, facts):
            case None:
                return None
            case CannotContinue(message=message):
                raise NeedsHumanError(message)
            case Continue(branch_head=head) if latest is not None:  # decided from it
                return self._continue(start, latest, head)
            case Continue():
                raise ImmError(f"{start.slug}: told to continue a batch that does not exist")
            case Fresh() as fresh:
                return self._fresh(start, latest, fresh)

    # -- a continuation batch ------------------------------------------------------------------
    def _continue(self, start: StartPlan, stopped: StoredBatch, branch_head: str) -> StoredBatch:
        if not start.plan.enrollable:  # before anything is merged or written
            raise UsageError(nothing_to_continue(start.plan))
        now = self.clock()
        head, merged = self._bring_in_the_base(start, stopped.state, branch_head, now)
        # what kept children spent is in `spent_before` with the rest of the stopped batch's
        children = [
            child.model_copy(update={"spend": None})
            for child in continued_children(start.plan, stopped.state, start.retry)
        ]
        kept = [child.task_id for child in children if child.state.done]
        changed = changed_intents(
            self.repo.changed_paths(stopped.state.base_head, head),
            [child.task_id for child in children],
        )
        continues = Continuation(
            batch_id=stopped.state.batch_id, kept=kept, changed=changed, merged_base=merged
        )
        state = new_batch_state(start, now, children, head, kept_commits(stopped.state, children),
                                flaky_before=self.store.flaky_in_repository())  # fmt: skip
        # The stopped batch's settings go on unless the person asks for others (issue 41 #2):
        # a retry must not widen the lanes, nor refuse the person's own `--max-parallel`.
        parallel = start.parallel_asked or stopped.state.max_parallel
        # what the stopped batch spent counts against the continuation's budget (issue 45)
        spent = line_spend(stopped.state)
        state = state.model_copy(
            update={"continues": continues, "max_parallel": parallel,
                    "spent_before": spent if spent.runs else None}
        )  # fmt: skip
        branch = RefUpdate(heads(batch_branch(start.slug)), head, branch_head)
        also = [branch, *self._close(stopped, state.batch_id, now)]
        kept_parallel = "" if start.parallel_asked else f"; keeps its max_parallel {parallel}"
        self.log(
            f"continues {stopped.state.batch_id}: {plural(len(kept), 'task')} already "
            f"integrated, plan changed: {', '.join(changed) or 'nothing'}{kept_parallel}"
        )
        first = verdict(state, [c.task_id for c in children if c.state is ChildState.PENDING])
        report = build_report(state, first, now)
        return self.store.write(None, state, report, self.results.stored(), also=also)

    def _bring_in_the_base(
        self, start: StartPlan, stopped: BatchRunState, branch_head: str, now: str
    ) -> tuple[str, str | None]:
        """The commits the base branch gained since, merged into the branch with one commit
        built like a candidate: merge-tree in the object store, no checkout."""
        base = start.base_head
        if self.repo.is_ancestor(base, branch_head):
            return branch_head, None
        merged = self.repo.merge_trees(branch_head, base)
        if not merged.conflicts and merged.tree == self.repo.commit(branch_head).tree:
            # what the base gained is on the branch already (it merged the branch, say): a
            # merge commit would change nothing and say something happened
            return branch_head, None
        if merged.conflicts:
            raise NeedsHumanError(
                f"cannot continue {stopped.batch_id}: merging {start.base_ref} into "
                f"{stopped.branch} conflicts in {', '.join(merged.conflicts)}; merge "
                f"{start.base_ref} into {stopped.branch} yourself and commit, then run again"
            )
        stamp = _git_date(now)
        message = (
            f"imm: merge {start.base_ref} into {stopped.branch}\n\n"
            f"Brings in what {start.base_ref} gained since {stopped.batch_id} started, before "
            "its continuation.\n"
        )
        commit = self.repo.commit_tree(
            merged.tree, [branch_head, base], message,
            author=start.committer, author_date=stamp,
            committer=start.committer, committer_date=stamp,
        )  # fmt: skip
        return commit, base

    def _close(self, stopped: StoredBatch, successor: str, now: str) -> Sequence[RefUpdate]:
        """A stopped batch that is not terminal yet (needs_human) ends as cancelled, saying
        which batch continues it; a terminal one is left as it is."""
        if stopped.state.batch_state.is_terminal:
            return []
        closed = t.cancel(stopped.state).model_copy(update={"updated_at": now})
        said = Verdict(
            BatchState.CANCELLED,
            f"{REASON_CONTINUED} {successor}",
            f"follow {successor}",
        )
        report = build_report(closed, said, now)
        return [self.store.prepare(stopped, closed, report, stopped.cache).update]

    # -- a fresh start -------------------------------------------------------------------------
    def _fresh(self, start: StartPlan, latest: StoredBatch | None, fresh: Fresh) -> FreshStart:
        if not start.plan.enrollable:  # before anything is said or archived
            raise UsageError(f"initiative {start.slug}: nothing is enrollable, no batch started")
        also: list[RefUpdate] = []
        if fresh.branch_head is not None:
            name = archive_ref(fresh.archive_as or f"before-{start.new_batch_id}")
            current = self.refs.read([name])[name]
            also.append(RefUpdate(name, fresh.branch_head, current))
            done = [c.task_id for c in latest.state.children if c.state.done] if latest else []
            self.log(
                f"--fresh discards {fresh.archive_as or 'the branch'} on "
                f"{batch_branch(start.slug)} ({plural(len(done), 'task')} integrated"
                f"{': ' + ', '.join(done) if done else ''}); the branch is kept as {name}"
            )
        if fresh.supersede is not None and latest is not None:
            now = self.clock()
            closed = t.cancel(latest.state).model_copy(update={"updated_at": now})
            said = Verdict(
                BatchState.CANCELLED, f"replaced by {start.new_batch_id} (--fresh)",
                f"follow {start.new_batch_id}",
            )  # fmt: skip
            report = build_report(closed, said, now)
            also.append(self.store.prepare(latest, closed, report, latest.cache).update)
        return FreshStart(fresh.branch_head, tuple(also))


def nothing_to_continue(plan: BatchPlan) -> str:
    """Why a continuation with every task settled elsewhere starts nothing: which batch
    integrated each task (issue 41 #1: it was an unexpected error)."""
    by_batch: dict[str, list[str]] = {}
    left: list[str] = []
    for child in plan.children:
        reason = child.reason or ""
        if child.status == "already_settled" and reason.startswith(SETTLED_BY):
            by_batch.setdefault(reason.removeprefix(SETTLED_BY), []).append(child.task_id)
        else:
            left.append(f"{child.task_id}: {reason or child.status}")
    said = "; ".join(f"{', '.join(tasks)} by {batch}" for batch, tasks in by_batch.items())
    if left:
        return (
            f"initiative {plan.initiative}: no task can run ({'; '.join(left)}"
            f"{'; integrated already: ' + said if said else ''}); nothing to continue"
        )
    return f"every task of {plan.initiative} is integrated already ({said}); nothing to continue"


def new_batch_state(
    start: StartPlan,
    now: str,
    children: list[BatchChild],
    head: str,
    commits: list[str],
    *,
    flaky_before: Mapping[str, int],
) -> BatchRunState:
    """The first state of a batch started (or continuing another) at `head`: every task of
    the plan is a child, settled by an earlier batch on this line, or excluded by the plan
    with its reason — none is dropped silently (issue 41). `flaky_before`: the flips the
    repository's newest batches recorded (issue 61), known flaky from its start."""
    plan = start.plan
    settled_tasks = {c.task_id for c in plan.children if c.status == "already_settled"}
    settled = [known for known in start.settled if known.task_id in settled_tasks]
    accounted = (
        {c.task_id for c in children}
        | {known.task_id for known in settled}
        | {c.task_id for c in plan.excluded if c.task_id not in settled_tasks}
    )
    missing = [task for task in plan.order if task not in accounted]
    if missing:
        raise ImmError(
            f"batch {start.new_batch_id} would leave out {', '.join(missing)}: neither a "
            "child, settled by an earlier batch on its line, nor excluded by the plan"
        )
    return BatchRunState(
        contract=STATE_CONTRACT,
        batch_id=start.new_batch_id,
        initiative_slug=start.slug,
        carrier=plan.carrier,
        plan_digest=plan.plan_digest,
        base_ref=start.base_ref,
        base_head=head,
        branch=batch_branch(start.slug),
        authorized_by=start.authorized_by,
        confirmation_time=now,
        budget=StateBudget(
            max_children=plan.budget.max_children,
            qa_failure_limit=plan.budget.qa_failure_limit,
            max_cost_usd=start.max_cost_usd,
        ),
        max_parallel=plan.max_parallel,
        batch_state=BatchState.RUNNING,
        children=children,
        commits=commits,
        adopted_heads=[],
        created_at=now,
        updated_at=now,
        plan_commit=start.base_head,  # the commit the request planned from
        settled_before=settled,
        flaky_before=dict(flaky_before),
    )


def _git_date(timestamp: str) -> str:
    from datetime import UTC, datetime

    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return f"{int(moment.timestamp())} +0000"


def pending_children(plan: BatchPlan) -> list[BatchChild]:
    """The batch's children: the enrollable tasks in plan order. Settled dependencies are
    done already, so `blocked_by` keeps only the enrollable ones."""
    enrollable = {child.task_id for child in plan.enrollable}
    after = plan.runs_after()
    return [
        BatchChild.pending(
            child.task_id,
            child.slice_id,
            [need for need in child.blocked_by if need in enrollable],
            after.get(child.task_id),
        )
        for child in plan.children
        if child.task_id in enrollable
    ]
