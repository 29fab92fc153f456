"""One lane from lane base to published outcome (SPEC §5.1).

A pooled tree moved to the lane base with a repository of the lane's own written into it
(verify/trees.py, git/lane_repo.py; decision 0028), optional `lane_setup`, a prompt rendered
from the intent, the executor run with an allowlisted environment under a reaper
(sandbox/contain.py), the scope and emptiness checks,
the task's descriptors on the lane tree with up to `qa_failure_limit` attempts, then exactly one
lane commit on the lane base — and its outcome published with the lane branch in one CAS. A lane
that fails publishes its outcome too. Everything the executor prints reaches the log masked.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from imm_action.costs import run_line
from imm_action.errors import ImmError
from imm_action.git.lane_repo import LaneRepository
from imm_action.git.refs import RefStore
from imm_action.git.repo import IMM_IDENTITY, GitRepo, Identity
from imm_action.lanes.change import changed_entries, tree_links
from imm_action.lanes.environment import AGENT_SESSION, executor_environment
from imm_action.lanes.outcome import publish_outcome
from imm_action.lanes.prompt import render_prompt
from imm_action.lanes.step import LaneCommands
from imm_action.masking import NO_MASK, Masker, masker_for
from imm_action.model.descriptor import parse_descriptor
from imm_action.model.intent import TaskIntent, intent_path
from imm_action.model.network import NetworkMode
from imm_action.model.outcome import (
    OUTCOME_CONTRACT,
    CheckResult,
    Failure,
    LaneOutcome,
    lane_commit_message,
)
from imm_action.model.refs import heads, lane_branch, lane_outcome_ref
from imm_action.model.spend import MAX_AGENT_RUNS, AgentRun, ExecutorReport
from imm_action.plan.glob import outside_scope
from imm_action.plan.lane_change import lane_change_refusal
from imm_action.render.failures import failure_ending, failure_text
from imm_action.sandbox.confine import (
    NOT_CONFINED,
    Bind,
    Confined,
    Confinement,
    Mount,
    NetworkAccess,
    named_folders,
)
from imm_action.sandbox.proxy import CommandReach, NetworkReach, refusal_lines
from imm_action.sandbox.toolchains import populate_home
from imm_action.text import clean_text, listed
from imm_action.verify.checks import Check, Verifier, mask_result
from imm_action.verify.failures import check_failures
from imm_action.verify.overlays import OverlayTree, taken_tree
from imm_action.verify.trees import LANE_HOME, PROMPT_FILE, CheckoutTree

REASON_EMPTY = "lane_empty"
REASON_OUTSIDE_SCOPE = "dirty_outside_scope"
REASON_QA_LIMIT = "QA failure limit reached"


@dataclass(frozen=True)
class LaneSpec:
    """Everything a lane needs to know, read from the batch state by the caller."""

    slug: str
    batch_id: str
    task_id: str
    slice_id: str
    base_head: str
    attempt: int
    qa_failure_limit: int
    executor: str
    lane_setup: str | None = None
    # The lane's limit: `lane_setup` and every executor run together (decision 0050); a
    # command still running when it is reached is killed and the lane parked.
    timeout_s: float = 3600.0
    executor_env: tuple[str, ...] = ()  # names the repository config maps in
    committer: Identity = IMM_IDENTITY  # the config's `committer`
    plan_paths: frozenset[str] = frozenset()  # what no lane may change (lane_touches_plan)
    executor_report: ExecutorReport = "auto"  # how the agent reports its cost (issue 45)
    # Where the lane keeps what its agent runs cost so far, for the runner that started it to
    # count against the batch's budget while the lane works (`imm run`); None: nobody reads it.
    spend_file: Path | None = None
    # what the executor and `lane_setup` reach (issue 60): open, none, or a list's hosts
    lane_network: NetworkMode | list[str] = "open"


@dataclass(frozen=True)
class LaneResult:
    outcome: LaneOutcome
    outcome_commit: str


def run_lane(
    spec: LaneSpec,
    refs: RefStore,
    verifier: Verifier,
    *,
    environment: Mapping[str, str],
    log: TextIO,
    git_date: Callable[[], str],
    confinement: Confinement = NOT_CONFINED,
) -> LaneResult:
    repo = refs.repo
    # The refs the lane publishes at its end must be nameable before the executor does paid
    # work (ids are checked when planned; this holds whatever state reached the lane).
    publishes = (
        heads(lane_branch(spec.slug, spec.task_id)),
        lane_outcome_ref(spec.batch_id, spec.task_id),
    )
    unnameable = [ref for ref in publishes if not repo.can_name(ref)]
    if unnameable:
        raise ImmError(f"lane {spec.task_id}: git cannot name {', '.join(unnameable)}; nothing ran")
    # A tree complete and clean at the lane base whatever the last lane did, held until the lane
    # is done: an overlay over the pool's base where the sandbox mounts one (overlays.py: it
    # costs the diff from the base), else a slot of the pool, left for the next holder to move.
    reach = NetworkReach(spec.lane_network, "lane_network", confined=confinement.active)
    if reach.unheld:
        print("imm: lane_network lists hosts, but lane code runs unconfined here: the list is "
              "not held", file=log, flush=True)  # fmt: skip
    with (
        contextlib.closing(reach),
        reach.command() as lane_reach,
        taken_tree(repo, spec.base_head, confinement, lane=True) as checkout,
    ):
        lane_repo = _lane_repository(repo, checkout)
        lane_repo.create(spec.base_head, lane_branch(spec.slug, spec.task_id))
        lane = _Lane(
            spec, repo, lane_repo, checkout, verifier, log, git_date, masker_for(environment),
            confinement, lane_reach.network,
        )  # fmt: skip
        try:
            outcome = lane.work(environment)
        finally:
            checkout.drop_lane()  # the files stay for the next holder to move
    outcome = _with_refusals(outcome, lane_reach, log)
    commit = publish_outcome(refs, spec.slug, outcome, git_date())
    return LaneResult(outcome, commit)


def _with_refusals(outcome: LaneOutcome, reach: CommandReach, log: TextIO) -> LaneOutcome:
    """Each host `lane_network` refused the executor or `lane_setup`, in the lane's log (host,
    port, when, how often) and on their failures, with the line that allows it."""
    for line in refusal_lines("lane_network", reach.refused):
        print(f"imm: {line}", file=log, flush=True)
    if not reach.blocked:
        return outcome
    failures = [failure.model_copy(update={"blocked_hosts": reach.blocked})
                if failure.step in ("executor", "lane_setup") else failure
                for failure in outcome.failures]  # fmt: skip
    return outcome.model_copy(update={"failures": failures, "blocked_hosts": reach.blocked})


def _lane_repository(repo: GitRepo, tree: CheckoutTree | OverlayTree) -> LaneRepository:
    if isinstance(tree, OverlayTree):
        return LaneRepository(
            repo, tree.root, tree.index, tree.upper, tree.view_wrapper(), tree.written
        )
    return LaneRepository(repo, tree.root, tree.index)


@dataclass
class _Lane:
    spec: LaneSpec
    repo: GitRepo
    lane_repo: LaneRepository
    checkout: CheckoutTree | OverlayTree
    verifier: Verifier
    log: TextIO
    git_date: Callable[[], str]
    mask: Masker = NO_MASK
    confinement: Confinement = NOT_CONFINED
    network: NetworkAccess = True  # the executor's and lane_setup's (lane_network)
    # each executor run's report of itself, every attempt's (issue 45)
    runs: list[AgentRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.commands = LaneCommands(
            self.checkout.root, self._confined, self.checkout.untrusted, self.spec.timeout_s,
            self.log, self.mask,
        )  # fmt: skip

    @property
    def prompt(self) -> Path:
        return self.checkout.slot / PROMPT_FILE

    @property
    def home(self) -> Path:
        return self.checkout.slot / LANE_HOME

    @property
    def tree_at(self) -> str:
        """Where the executor sees its tree (one path for every lane, in the sandbox)."""
        return self.confinement.tree_at or str(self.checkout.root)

    def _seen(self, beside: str) -> str:
        """Where a file beside the tree (the prompt) is seen by the executor."""
        if not self.confinement.active:
            return str(self.checkout.slot / beside)
        return str(Path(self.tree_at).parent / beside)

    def work(self, environment: Mapping[str, str]) -> LaneOutcome:
        """The lane's outcome, saying why its lane code ran unconfined (None: it did not)."""
        why = self.confinement.unconfined_reason
        outcome = self._work(environment)
        runs = self.runs[-MAX_AGENT_RUNS:]
        return outcome.model_copy(update={"unconfined": why, "agent_runs": runs})

    def _work(self, environment: Mapping[str, str]) -> LaneOutcome:
        spec = self.spec
        text = self.repo.read_file(spec.base_head, intent_path(spec.task_id))
        if text is None:
            missing = f"invalid_intent: {intent_path(spec.task_id)} is missing at the lane base"
            return self._needs_human(missing, 0, [])
        intent = TaskIntent.model_validate_json(text)
        checks = [
            Check(f"{spec.task_id}:{item.id}", parse_descriptor(item.verification))
            for item in intent.acceptance
        ]
        extra = {
            **_imm_variables(spec, self._seen(PROMPT_FILE)),
            # git in the lane finds the lane's repository or none, never one around the slot
            "GIT_CEILING_DIRECTORIES": str(Path(self.tree_at).parent),
            **self._own_home(environment),
        }
        env = executor_environment(environment, spec.executor_env, extra)
        if spec.lane_setup:
            setup = self.commands.run("lane_setup", spec.lane_setup, env).failure
            if setup is not None:
                why = f"lane_setup {failure_ending(setup)}"
                return self._needs_human(why, 0, [], [setup])
        return self._attempts(intent, checks, env)

    def _own_home(self, environment: Mapping[str, str]) -> dict[str, str]:
        """In the sandbox, the executor's own writable home, fresh for the lane (agents keep
        their state there; `lane_setup` installs there), showing read-only what the user's
        toolchains need and the paths the config exposes under the user's home — bound where
        they lie, never copied (issue 59 #6), never the user's credential files. Unconfined,
        the caller's."""
        if not self.confinement.active:
            return {}
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(mode=0o700)
        toolchains = self.confinement.toolchains
        populate_home(self.home, self.confinement.home_binds(), toolchains.files, confined=True)
        # git's identity, and nothing else of the user's git config (which may hold
        # credential helpers or URLs with tokens): an agent that commits needs a name
        identity = self.repo.configured_identity() or self.spec.committer
        (self.home / ".gitconfig").write_text(
            f"[user]\n\tname = {_quoted(identity.name)}\n\temail = {_quoted(identity.email)}\n",
            encoding="utf-8",
        )
        path = environment.get("PATH", "")
        return {"HOME": str(self.home), "TMPDIR": "/tmp", **dict(toolchains.variables),
                "PATH": os.pathsep.join([str(self.home / ".local" / "bin"), path])}  # fmt: skip

    def _confined(self, argv: Sequence[str]) -> Confined:
        """The executor's place in the sandbox: its tree and home writable, its prompt and
        the user's objects (its repository's alternates) read-only, and the folders of the
        files its (trusted) command line names where a private /tmp would hide them."""
        objects = self.repo.objects_directory()
        binds: list[Mount] = [
            self.checkout.mount(self.tree_at),
            Bind(self.home, str(self.home), writable=True),
            Bind(objects, str(objects)),
        ]
        if self.prompt.exists():  # not yet for lane_setup
            binds.append(Bind(self.prompt, self._seen(PROMPT_FILE)))
        binds += self.confinement.own_home_binds(self.home)
        shown = named_folders(argv, self.confinement)
        return Confined(self.confinement, tuple(binds), self.tree_at, network=self.network,
                        shown=shown)  # fmt: skip

    def _attempts(
        self, intent: TaskIntent, checks: list[Check], env: dict[str, str]
    ) -> LaneOutcome:
        """Executor, scope and emptiness checks, descriptors; again with the findings until the
        checks pass or the QA failure limit is reached."""
        spec = self.spec
        findings: list[CheckResult] = []
        failures: list[Failure] = []
        qa_failures = 0
        while True:
            prompt = render_prompt(intent, spec.attempt, qa_failures + 1, failures)
            self.prompt.write_text(prompt, encoding="utf-8")
            env["IMM_ATTEMPT"] = str(qa_failures + 1)
            self._resume_session(env)
            ran = self.commands.run(
                "executor", spec.executor, env, stdin=self.prompt, report=spec.executor_report
            )
            self.runs.append(ran.report)
            self._tell_spend()
            if ran.report.cost_usd is not None:
                print(f"imm: agent run: {run_line(ran.report)}", file=self.log, flush=True)
            executor = ran.failure
            if executor is not None:
                why = f"executor {failure_ending(executor)}"
                return self._needs_human(why, qa_failures, findings, [executor])
            tree = self.lane_repo.snapshot()
            changes = changed_entries(self.repo, spec.base_head, tree)
            if not changes:
                empty = f"{REASON_EMPTY}: the executor changed nothing"
                return self._needs_human(empty, qa_failures, findings)
            outside = outside_scope(intent.scope_hint, [entry.path for entry in changes])
            if outside:
                dirty = f"{REASON_OUTSIDE_SCOPE}: {listed(outside)}"
                return self._needs_human(dirty, qa_failures, findings)
            # .git paths, gitlinks, links out of the repository (the integrator checks again)
            links = tree_links(self.repo, tree, changes)
            refusal = lane_change_refusal(changes, ["**"], spec.plan_paths, links)
            if refusal is not None:
                return self._needs_human(refusal, qa_failures, findings)
            results = self._verify(tree, checks)
            for result in results:
                verdict = "passed" if result.passed else "FAILED"
                print(f"imm: check {result.check_id}: {verdict}", file=self.log, flush=True)
            failed = [result for result in results if not result.passed]
            if not failed:
                committed = self._commit(intent, tree, qa_failures, findings)
                # what the earlier attempt failed, and the executor then fixed; how long
                # each check took (the integrator's estimate before it runs them)
                durations = {result.check_id: result.duration_ms for result in results}
                return committed.model_copy(
                    update={"failures": failures, "durations_ms": durations}
                )
            qa_failures += 1
            findings = failed
            failures = check_failures(checks, failed, self.mask)
            for failure in failures:
                print(failure_text(failure, "imm:   "), file=self.log, flush=True)
            if qa_failures >= spec.qa_failure_limit:
                return self._needs_human(REASON_QA_LIMIT, qa_failures, findings, failures)

    def _resume_session(self, env: dict[str, str]) -> None:
        """A QA attempt resumes the agent's session of the last one, when it reported one:
        the agent keeps what it read (its home is the lane's for every attempt)."""
        env.pop(AGENT_SESSION, None)
        session = self.runs[-1].session_id if self.runs else None
        if session is not None:
            env[AGENT_SESSION] = session

    def _tell_spend(self) -> None:
        """What the agent runs cost so far, written whole (a reader never sees half)."""
        if self.spec.spend_file is None:
            return
        spent = sum(run.cost_usd or 0.0 for run in self.runs)
        partial = self.spec.spend_file.with_name(self.spec.spend_file.name + ".tmp")
        with contextlib.suppress(OSError):  # only the budget's look-ahead needs it
            partial.write_text(f"{spent:.6f}\n", encoding="utf-8")
            partial.replace(self.spec.spend_file)

    def _verify(self, tree: str, checks: list[Check]) -> list[CheckResult]:
        """The lane's own checks, in its own tree when that holds exactly the snapshot (one
        tree less to move), else in a slot of the pool."""
        with self.checkout.lent() as here:
            results = self.verifier.verify(tree, checks, at=here)
            if here is not None and not all(result.passed for result in results):
                here.restore(tree)  # the executor's next attempt finds its tree as it left it
        return results

    def _commit(
        self,
        intent: TaskIntent,
        tree: str,
        qa_failures: int,
        findings: list[CheckResult],
    ) -> LaneOutcome:
        """The one lane commit: its only parent is the lane base."""
        spec = self.spec
        now = self.git_date()
        author, author_date = _author(self.lane_repo, spec.base_head, now, spec.committer)
        message = lane_commit_message(spec.task_id, intent.subject, spec.batch_id)
        lane_commit = self.repo.commit_tree(
            tree,
            [spec.base_head],
            message,
            author=author,
            author_date=author_date,
            committer=spec.committer,
            committer_date=now,
        )
        print(f"imm: lane commit {lane_commit}", file=self.log, flush=True)
        masked = [mask_result(self.mask, finding) for finding in findings]
        return _outcome(spec, "settled", None, qa_failures, masked, lane_commit)

    def _needs_human(
        self,
        reason: str,
        qa_failures: int,
        findings: Sequence[CheckResult],
        failures: Sequence[Failure] = (),
    ) -> LaneOutcome:
        reason = self.mask(reason)
        print(f"imm: lane needs a person: {reason}", file=self.log, flush=True)
        masked = [mask_result(self.mask, finding) for finding in findings]
        outcome = _outcome(self.spec, "needs_human", reason, qa_failures, masked, None)
        return outcome.model_copy(update={"failures": list(failures)})


def _author(
    lane_repo: LaneRepository, base: str, now: str, committer: Identity
) -> tuple[Identity, str]:
    """The executor's identity when it committed its work, else the committer's."""
    head = lane_repo.executor_head()
    if head is not None and head != base:
        info = lane_repo.executor_commit(head)
        if info is not None:
            author = _plain_identity(info.author)
            if author is not None:
                return author, info.author_date
    return committer, now


def _plain_identity(identity: Identity) -> Identity | None:
    """The executor's identity as plain text (untrusted: no escapes, no control or invisible
    characters, no `<>` that would forge the header, at most 200 characters each); None when
    nothing of its name is left."""
    name, email = (
        clean_text(part, drop_invisible=True)
        .replace("<", "").replace(">", "").replace("\n", " ").strip()[:200]
        for part in (identity.name, identity.email)
    )  # fmt: skip
    return Identity(name, email) if name else None


def _quoted(value: str) -> str:
    """A git config value: quoted, with its quotes and backslashes escaped, on one line."""
    cleaned = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{cleaned}"'


def _imm_variables(spec: LaneSpec, prompt: str) -> dict[str, str]:
    return {
        "IMM_BATCH_ID": spec.batch_id,
        "IMM_INITIATIVE": spec.slug,
        "IMM_TASK_ID": spec.task_id,
        "IMM_SLICE_ID": spec.slice_id,
        "IMM_INTENT_PATH": intent_path(spec.task_id),
        "IMM_PROMPT_FILE": prompt,
        "IMM_ATTEMPT": "1",
        "IMM_BASE_HEAD": spec.base_head,
    }


def _outcome(  # noqa: PLR0917 - the outcome's own fields, in its order
    spec: LaneSpec,
    state: Literal["settled", "needs_human"],
    reason: str | None,
    qa_failures: int,
    findings: Sequence[CheckResult],
    lane_commit: str | None,
) -> LaneOutcome:
    return LaneOutcome(
        contract=OUTCOME_CONTRACT,
        batch_id=spec.batch_id,
        task_id=spec.task_id,
        attempt=spec.attempt,
        state=state,
        reason=reason,
        qa_failures=qa_failures,
        # a finding names its failing tests; its whole ledger stays out of the outcome, which
        # a lane's report must never push past its bound (OUTCOME_MAX_BYTES)
        findings=[finding.model_copy(update={"tests": None}) for finding in findings],
        lane_commit=lane_commit,
    )
