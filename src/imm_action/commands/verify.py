"""`imm verify --batch-id ID --shard N`: run one shard of a round's checks fanned out to verify
jobs, and write its verdict (issue 32, decision 0054).

On GitHub the verify job runs `--phase fetch` (a read token: the batch's refs and the round's
candidates) and then `--phase run` (no token: the checks, each in the sandbox, then the verdict
file, which imm writes outside the sandbox and the runner uploads). The shard is read from the
batch state, never from a job input: which checks run on which tree is the stack job's word,
and the descriptors are the plan's (its commit's intents), never a candidate's."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from imm_action.actions.runtime import ActionsFiles, append_summary, write_outputs
from imm_action.actions.summary import shard_summary
from imm_action.batches.repo import (
    BatchRepo,
    check_place,
    config_warning_lines,
    open_batch_repo,
    planned_config,
    setup_cache_outputs,
)
from imm_action.console import CommandIO
from imm_action.errors import EXIT_OK, UsageError
from imm_action.git.refs import RefStore, RemoteRefStore
from imm_action.integrate.store import StateStore
from imm_action.masking import masker_for
from imm_action.model.refs import verify_ref
from imm_action.model.shard import VerifyRound, VerifyShard, verdict_artifact
from imm_action.model.state import BatchRunState
from imm_action.passes.gate import gate_at
from imm_action.passes.intent_checks import checks_by_digest
from imm_action.ports import Ports
from imm_action.verify.checks import Check, TreeJob, Verifier
from imm_action.verify.result_cache import ResultCache
from imm_action.verify.verdicts import write_verdict
from imm_action.workspace import config_path


@dataclass(frozen=True)
class VerifyArgs:
    batch_id: str
    shard: int
    repo: Path
    remote: str | None
    environment: Mapping[str, str]
    phase: str = "all"  # "fetch", "run", or both in one process
    verdicts: Path | None = None  # the folder the verdict file goes in (--phase run, all)
    actions: ActionsFiles | None = None


def run(args: VerifyArgs, ports: Ports) -> int:
    io = ports.io
    batch_repo = open_batch_repo(args.repo, args.remote, ports.initiatives)
    for line in config_warning_lines(batch_repo):
        io.warn(line)
    if args.phase in ("fetch", "all"):
        if not isinstance(batch_repo.refs, RemoteRefStore):
            raise UsageError("imm verify needs --remote (the round lives on a remote)")
        batch_repo.refs.refresh()
        state, fanned, shard = _shard_of(args, batch_repo.refs)
        io.warn(
            f"imm verify {shard.index}/{len(fanned.shards)}: fetched batch {state.batch_id}, "
            f"{len(shard.checks)} checks up to {fanned.top[:12]}"
        )
        if args.phase == "fetch":
            if args.actions is not None:  # where the job's cache steps restore and save setup
                planned = replace(batch_repo, config=planned_config(batch_repo, state, None))
                write_outputs(
                    args.actions, setup_cache_outputs(planned, state.judged_at, args.environment)
                )
            return EXIT_OK
    if args.verdicts is None:
        raise UsageError("imm verify --phase run needs --verdicts DIR")
    return _run_shard(args, io, batch_repo, args.verdicts)


def _run_shard(args: VerifyArgs, io: CommandIO, batch_repo: BatchRepo, folder: Path) -> int:
    state, fanned, shard = _shard_of(args, batch_repo.refs)
    repo = batch_repo.repo
    # the plan's config (its sandbox, check_setup, verify_parallel), never a candidate's
    batch_repo = replace(batch_repo, config=planned_config(batch_repo, state, None))
    # the branch checks too, from the plan's config: a round's fan-out owes them as any check
    branch = gate_at(batch_repo.root, state.judged_at, config_path()).checks
    known = checks_by_digest(repo, state, branch)
    by_tree: dict[str, list[Check]] = {}
    for owed in shard.checks:
        check = known.get(owed.descriptor_digest)
        if check is None:  # not a check of the plan: never run, so never passed
            io.warn(f"imm verify: {owed.check_id} is no check of the plan; not run")
            continue
        by_tree.setdefault(owed.tree, []).append(check)
    path_env = args.environment.get("PATH", "")

    def log(line: str) -> None:
        io.warn(f"imm: {line}")

    started = time.monotonic()
    place = check_place(batch_repo, path_env, log, holds_token=False, setup_at=state.judged_at)
    try:
        verifier = Verifier(
            repo, ResultCache(), path_env=path_env, workers=batch_repo.config.verify_parallel,
            mask=masker_for(args.environment), place=place,
        )  # fmt: skip
        jobs = [TreeJob(tree, tuple(checks)) for tree, checks in by_tree.items()]
        found = verifier.verify_queued(jobs)
    finally:
        place.close()
    results = [
        (job.tree, check.digest, result)
        for job, job_results in zip(jobs, found, strict=True)
        for check, result in zip(job.checks, job_results, strict=True)
    ]
    verdict = write_verdict(
        folder, batch_id=state.batch_id, run_id=fanned.run_id, shard=shard, results=results
    )
    name = verdict_artifact(state.batch_id, fanned.run_id, shard.index)
    failed = sum(1 for _, _, result in results if not result.passed)
    io.warn(
        f"imm verify {shard.index}/{len(fanned.shards)}: {len(results)} checks run, "
        f"{failed} failed, in {time.monotonic() - started:.1f} s; verdict in {verdict}"
    )
    if args.actions is not None:
        write_outputs(args.actions, {"artifact": name, "verdict": str(verdict)})
        append_summary(args.actions, shard_summary(shard.index, len(fanned.shards), results))
    return EXIT_OK


def _shard_of(args: VerifyArgs, refs: RefStore) -> tuple[BatchRunState, VerifyRound, VerifyShard]:
    stored = StateStore(refs).load(args.batch_id)
    if stored is None:
        raise UsageError(f"no batch {args.batch_id}")
    state = stored.state
    fanned = _round_of(state, args.environment)
    if fanned is None:
        raise UsageError(
            f"batch {args.batch_id} has no checks fanned out to this run's verify jobs (their "
            "verdicts were taken, or the batch ended)"
        )
    if not 1 <= args.shard <= len(fanned.shards):
        raise UsageError(
            f"batch {args.batch_id} has shards 1 to {len(fanned.shards)}, not {args.shard}"
        )
    ref = verify_ref(state.batch_id)
    top = refs.read([ref])[ref]
    # the ref follows the newest round; an earlier run's round (pipelined rounds, ADR 0075)
    # is fetched with the state, whose commit keeps its top
    earlier = fanned is not state.verifying
    if (top != fanned.top and not earlier) or refs.repo.commit_if_present(fanned.top) is None:
        raise UsageError(
            f"the verify ref of batch {args.batch_id} is at {top or 'nothing'}, not at the "
            f"round's top {fanned.top}: another round took over"
        )
    return state, fanned, fanned.shards[args.shard - 1]


def _round_of(state: BatchRunState, environment: Mapping[str, str]) -> VerifyRound | None:
    """This workflow run's round, where the job knows its run (GITHUB_RUN_ID): another run's
    verdicts would not count; else the newest."""
    run_id = environment.get("GITHUB_RUN_ID", "")
    return state.round_of(int(run_id)) if run_id.isdigit() else state.verifying
