"""The repository's own checks on every move of the batch branch (issue 44, ADR 0061).

`branch_checks` in the config are checks owned by no task: the branch's head level of every
stack holds them, so they run on every move, united with the held checks, bisected like any
check (a culprit is parked naming `branch:<name>`), fanned out and carried over by `reads` as
any check is. `held_checks: branch` leaves the tasks' checks to gate their own lanes' moves
only. They are read from the config at the plan's commit, as the intents are: never from a
tree a lane wrote. Before the first lane starts, the base is verified against them: a red base
stops the batch before any agent runs (`batch_base_check_failed`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from imm_action.integrate import transitions
from imm_action.integrate.facts import ChecksFact, ChecksFound
from imm_action.integrate.flakes import FLAKE_RERUNS, Flips, Rerun, Trial, confirm_all, forgiven
from imm_action.integrate.reasons import BASE_CHECK_FAILED, NO_BRANCH_CHECKS
from imm_action.model.config import (
    BranchCheck,
    HeldChecks,
    RepoConfig,
    branch_check_id,
    line_command,
)
from imm_action.model.descriptor import VerificationDescriptor
from imm_action.model.outcome import CheckResult
from imm_action.model.refs import batch_branch
from imm_action.model.state import BatchRunState, BranchVerdict, known_flaky
from imm_action.plan.check_paths import run_scripts
from imm_action.render.failures import failure_ending
from imm_action.text import clean_text, first_bytes, listed
from imm_action.verify.checks import Check, TreeRerun, Verifier
from imm_action.verify.failures import check_failure, command_text
from imm_action.verify.result_cache import ResultCache
from imm_action.workspace import load_config_at


@dataclass(frozen=True)
class BranchGate:
    """The branch checks, and what else gates a move (`held_checks`)."""

    checks: tuple[Check, ...] = ()
    held: HeldChecks = "all"
    flaky: frozenset[str] = frozenset()  # `flaky_tests`: reported, never blocking (issue 61)

    def head_checks(self, held_by_tasks: Sequence[Check]) -> tuple[Check, ...]:
        """What the batch head's level of a stack holds: the branch checks, after the checks of
        every task the branch holds unless `held_checks: branch`."""
        tasks = tuple(held_by_tasks) if self.held == "all" else ()
        return (*tasks, *self.checks)

    def below(self, tasks: Sequence[str]) -> list[str]:
        """The tasks below a candidate whose checks it must pass too."""
        return list(tasks) if self.held == "all" else []

    def verdicts(self, results: ResultCache, tree: str, head: str) -> list[BranchVerdict]:
        """Each branch check's last verdict on the head (`tree`), from what the cache holds;
        a failure with its command and last lines."""
        return [
            BranchVerdict(check_id=check.check_id, head=head,
                          passed=None if found is None else found.passed,
                          failure=check_failure(check, found) if found and not found.passed
                          else None)
            for check in self.checks
            for found in [results.get(tree, check.digest)]
        ]  # fmt: skip

    @property
    def scripts(self) -> dict[str, list[str]]:
        """The repository files the branch checks run (`sh scripts/test.sh`), each with the
        checks that do: the plan's, which no lane may change (issue 58)."""
        found: dict[str, list[str]] = {}
        for check in self.checks:
            for path in run_scripts(check.descriptor.command):
                found.setdefault(path, []).append(check.check_id)
        return found

    def joined(self, fact: ChecksFact | None) -> ChecksFact | None:
        """A candidate's checks with the branch checks: each lane's move counts them among
        what passed on the head it makes (`verified_on_top`), and a failing one is its own,
        not a check it broke (issue 62 #7: the head level's checks alone run them too)."""
        if not self.checks or not isinstance(fact, ChecksFound):
            return fact
        return ChecksFound((*fact.checks, *self.checks))


NO_GATE = BranchGate()


def branch_checks_of(config: RepoConfig) -> tuple[Check, ...]:
    """The config's branch checks as checks `branch:<name>` (`branch:1`, … when unnamed)."""
    found: list[Check] = []
    for position, item in enumerate(config.branch_checks, start=1):
        given = item if isinstance(item, BranchCheck) else BranchCheck(command=item)
        command = given.command
        if isinstance(command, str):
            command = line_command(command)
        descriptor = VerificationDescriptor(
            contract="assurance_kernel/verification_descriptor/v2", command=command,
            environment=given.environment, reads=given.reads, report=given.report,
        )  # fmt: skip
        found.append(Check(branch_check_id(item, position), descriptor))
    return tuple(found)


_HELD_SAID = {
    "all": "held_checks: all — every check of every task the branch holds, and the moving "
    "lanes' own, besides these.",
    "branch": "held_checks: branch — each task's checks gate its own lane's move; later moves "
    "are gated by these alone.",
}


def gate_markdown(slug: str, config: RepoConfig) -> list[str]:
    """What gates every move of the batch branch, as a plan shows it before a batch runs: the
    branch checks as written, and what `held_checks` leaves to them; without any, that only
    the tasks' own checks do (issue 62 #1)."""
    lines = [f"## What gates every move of `{batch_branch(slug)}`", ""]
    if not config.branch_checks:
        return [*lines, NO_BRANCH_CHECKS, ""]
    for position, item in enumerate(config.branch_checks, start=1):
        command = item.command if isinstance(item, BranchCheck) else item
        written = (
            command
            if isinstance(command, str)
            else command_text([command.executable, *command.argv], command.cwd)
        )
        written = written.replace("\n", " ")  # one line: a YAML block may hold a command
        fence = "``" if "`" in written else "`"
        lines.append(f"- `{branch_check_id(item, position)}`: {fence}{written}{fence}")
    return [*lines, "", _HELD_SAID[config.held_checks], ""]


def gate_at(root: Path, commit: str, config_file: str) -> BranchGate:
    """The gate the config at `commit` (the plan's) sets."""
    config = load_config_at(root, commit, config_file).config
    return BranchGate(branch_checks_of(config), config.held_checks, frozenset(config.flaky_tests))


def red_base(
    verifier: Verifier, gate: BranchGate, base_tree: str, known: frozenset[str] = frozenset()
) -> tuple[list[tuple[Check, CheckResult]], tuple[str, ...]]:
    """The branch checks the base fails (reused from the cache while the base and the checks
    are unchanged) — each failure run again there up to FLAKE_RERUNS times, as a stack's is
    (issue 61): one that passes a rerun is flaky, and its passing rerun becomes the base's
    verdict — and the flips seen. ([], ()) when it is green. `known`: tests seen to flip."""
    if not gate.checks:
        return [], ()
    results = verifier.verify(base_tree, list(gate.checks))
    flips = Flips(set(known))
    # counted here, as the base's: no stack counts the head's verdict as a run of its own
    verifier.cache.first_counted((base_tree, check.digest, 0) for check in gate.checks)

    def run_again(reruns: Sequence[Rerun]) -> list[CheckResult]:
        verifier.cache.first_counted((base_tree, r.check.digest, r.key) for r in reruns)
        return verifier.verify_again_queued(
            [TreeRerun(base_tree, r.check, r.key, r.alone) for r in reruns]
        )

    judged = [forgiven(result, check, gate.flaky) for check, result in
              zip(gate.checks, results, strict=True)]  # fmt: skip
    for result, forgiving in zip(results, judged, strict=True):
        if not result.passed and forgiving.passed:
            flips.flipped(0, forgiving.flaky_tests)
    failing = [(check, result) for check, result in zip(gate.checks, judged, strict=True)
               if not result.passed]  # fmt: skip
    trials = [Trial(0, check, result, FLAKE_RERUNS) for check, result in failing]
    tried = confirm_all(trials, run_again, flips) or []  # (a base's rerun is always known)
    failed: list[tuple[Check, CheckResult]] = []
    for (check, _), confirmed in zip(failing, tried, strict=True):
        if not confirmed.flaky:
            failed.append((check, confirmed.result))
        elif confirmed.result.passed:
            verifier.cache.put(base_tree, check.digest, confirmed.result)
    return failed, flips.seen


def green_base(
    verifier: Verifier,
    gate: BranchGate,
    state: BatchRunState,
    base: tuple[str, str],
    log: Callable[[str], None],
) -> BatchRunState:
    """The state once the base (its commit and tree, before any lane) is judged by the branch
    checks: the flips seen counted, and the batch waiting for a person where one failed on
    every run."""
    head, tree = base
    failed, flips = red_base(verifier, gate, tree, known_flaky(state))
    state = transitions.note_flaky(state, flips)
    unknown = unnamed_flaky(verifier.cache, gate, tree)
    if unknown:
        log(
            f"warning: flaky_tests in .github/imm.yml lists {listed(unknown)}, which no branch "
            f"check's test report on {state.base_ref} names: it forgives nothing (write each "
            "id as the report names it, e.g. tests/test_io.py::test_timeout)"
        )
    for check, result in failed:
        log(f"branch check {check.check_id} failed on the base ({how_it_ended(check, result)})")
    if not failed:
        return state
    return transitions.head_check_failed(state, base_failure_reason(state.base_ref, head, failed))


def unnamed_flaky(results: ResultCache, gate: BranchGate, tree: str) -> list[str]:
    """The ids `flaky_tests` lists that neither name a branch check nor a test the branch
    checks reported on `tree` (the base): a typo, or a test since renamed."""
    named = {check.check_id for check in gate.checks}
    for check in gate.checks:
        result = results.get(tree, check.digest)
        if result is not None and result.tests is not None:
            named.update(result.tests.tests)
    return sorted(test for test in gate.flaky if test not in named)


def how_it_ended(check: Check, result: CheckResult) -> str:
    """In the words every failed command gets (`exited with 1`, `timed out after 2 s`, `was
    stopped: its output passed its limit`, …): a check killed for its output or its time
    has an exit status that says nothing."""
    return failure_ending(check_failure(check, result))


REASON_BYTES = 1500  # of a stop reason: stored in the state, shown in every report


def base_failure_reason(
    base_ref: str, base: str, failed: Sequence[tuple[Check, CheckResult]]
) -> str:
    """Why the batch stops before any lane: its base fails branch checks — which, how each
    ended, and the last lines it printed (untrusted: cleaned, bounded). Its start is kept
    whole however long the lines: `batch_base_check_failed` is what stops the batch."""
    ids = [check.check_id for check, _ in failed]
    said = []
    for check, result in failed[:3]:
        # the last lines that say something: a rule of dashes (unittest's) says nothing
        lines = clean_text(result.output_tail).splitlines()
        tail = [line for line in lines if any(char.isalnum() for char in line)][-3:]
        said.append(
            f"{check.check_id} {how_it_ended(check, result)}"
            + (f": {' | '.join(tail)}" if tail else "")
        )
    start = (
        f"{BASE_CHECK_FAILED}: {listed(ids)} failed on {base_ref} at {base[:12]} before any lane "
        "started"
    )
    room = REASON_BYTES - len(start.encode("utf-8")) - len(" ()")
    return f"{start} ({first_bytes('; '.join(said), room)})"
