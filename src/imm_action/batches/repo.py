"""What the batch commands share: opening the repository's refs and building a pass request."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from imm_action.carriers.source import InitiativeSource
from imm_action.errors import Problem, UsageError
from imm_action.git import GitRunner
from imm_action.git.refs import LocalRefStore, RefStore, RemoteRefStore
from imm_action.git.repo import IMM_IDENTITY, GitRepo, Identity
from imm_action.integrate.store import StateStore
from imm_action.model.common import format_timestamp
from imm_action.model.config import RepoConfig
from imm_action.model.state import BatchRunState
from imm_action.sandbox.choice import choose_confinement
from imm_action.sandbox.confine import Confinement
from imm_action.sandbox.leftovers import remove_left_by_dead
from imm_action.sandbox.proxy import NetworkReach
from imm_action.verify.check_setup import SCRATCH_PREFIX, CheckPlace, scratch_root
from imm_action.workspace import (
    load_config,
    load_config_at,
    locate_repo,
)


@dataclass(frozen=True)
class BatchRepo:
    root: Path
    repo: GitRepo
    refs: RefStore
    config: RepoConfig
    initiatives: InitiativeSource  # where the initiative is read from (chosen by the CLI)
    # what the config's reading warned about (unknown keys, file:line, did-you-mean): every
    # command that reads it prints them (issue 44: `imm run` and the jobs said nothing)
    config_warnings: tuple[Problem, ...] = ()

    def forked(self) -> BatchRepo:
        """The same batch repository in a process forked from this one (a local lane): its
        root, config and what git said about it are known already, its git handles are new.
        Its refs are the repository's own, as for `imm lane` without `--remote`."""
        repo = self.repo.forked()
        return BatchRepo(self.root, repo, LocalRefStore(repo), self.config, self.initiatives)


def logs_folder(batch_repo: BatchRepo) -> Path:
    """Where imm writes the logs of a repository's runs (lanes' logs, failures in full)."""
    return batch_repo.repo.common_directory() / "imm" / "logs"


def _executor_record(batch_repo: BatchRepo, slug: str) -> Path:
    return batch_repo.repo.common_directory() / "imm" / "executors" / slug


def remember_executor(batch_repo: BatchRepo, slug: str, executor: str) -> None:
    """The `--executor` a person ran `slug` with, kept beside the logs (never in a ref, which
    may be pushed): its continuation and every printed command use it again (issue 41 #2)."""
    path = _executor_record(batch_repo, slug)
    with contextlib.suppress(OSError):  # a read-only repository runs all the same
        path.parent.mkdir(parents=True, exist_ok=True)
        # 0600: a command line may carry what only its user should read
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as record:
            record.write(executor + "\n")


def executor_to_print(batch_repo: BatchRepo, slug: str, given: str | None = None) -> str | None:
    """The executor a printed `imm run` line must carry: the one given, else — when the config
    names none — the one `slug` last ran with; None when the config's serves."""
    if given:
        return given
    if batch_repo.config.executor:
        return None
    try:
        return _executor_record(batch_repo, slug).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def committer_of(config: RepoConfig) -> Identity:
    """The configured committer of lane commits and candidates, else imm-action."""
    if config.committer is None:
        return IMM_IDENTITY
    return Identity(config.committer.name, config.committer.email)


def with_overrides(batch_repo: BatchRepo, **asked: float | None) -> BatchRepo:
    """The batch repository with the config values given on the command line (those not None)
    in place of the config's."""
    update = {name: value for name, value in asked.items() if value is not None}
    if not update:
        return batch_repo
    return replace(batch_repo, config=batch_repo.config.model_copy(update=update))


def planned_config(batch_repo: BatchRepo, state: BatchRunState, fallback: str | None) -> RepoConfig:
    """The config the batch was planned with (its `lane_setup`, `executor_env`, committer,
    sandbox, `verify_parallel`): never the user's working tree, never a lane's (ADR 0034).
    A job's clone that does not hold the plan's commit reads it at `fallback`, a commit whose
    config no lane of the batch could change (`lane_touches_plan`), else keeps the checkout's."""
    # read through the object reader the lane reads its intent with: no process of its own
    present = batch_repo.repo.commit_if_present(state.judged_at) is not None
    at = state.judged_at if present else fallback
    return batch_repo.config if at is None else load_config_at(batch_repo.root, at).config


def config_warning_lines(batch_repo: BatchRepo) -> list[str]:
    """The config's warnings as imm prints them (`imm: .github/imm.yml:3: warning: …`)."""
    return [f"imm: {warning.render()}" for warning in batch_repo.config_warnings]


def open_batch_repo(path: Path, remote: str | None, initiatives: InitiativeSource) -> BatchRepo:
    """The repository a batch runs in: its work tree root, and where its refs live."""
    project, root = locate_repo(path)
    if root.resolve() != project:
        raise UsageError(f"--repo {path}: batches run at the top of a work tree ({root})")
    repo = GitRepo(root, GitRunner(root))
    refs: RefStore = LocalRefStore(repo) if remote is None else RemoteRefStore(repo, remote)
    loaded = load_config(root)
    return BatchRepo(root, repo, refs, loaded.config, initiatives, loaded.warnings)


def base_of(batch_repo: BatchRepo) -> tuple[str, str]:
    """The base branch (config `base_ref`, else the checked-out branch) and its head."""
    base_ref = batch_repo.config.base_ref or batch_repo.repo.current_branch()
    if not base_ref:
        raise UsageError("HEAD is detached: set base_ref in .github/imm.yml")
    head = batch_repo.repo.branch_head(base_ref)
    if head is None:
        raise UsageError(f"base branch {base_ref!r} does not exist")
    return base_ref, head


def new_batch_id(slug: str) -> str:
    return f"batch-{slug[:85]}-{uuid.uuid4()}"


def now() -> str:
    return format_timestamp(datetime.now(UTC))


def check_place(
    batch_repo: BatchRepo,
    path_env: str,
    log: Callable[[str], None],
    *,
    holds_token: bool,
    setup_at: str,
) -> CheckPlace:
    """Where this command's lane code and checks run (SPEC §8): in the sandbox, refused while
    imm holds a token where none works (unless the config says `sandbox: none`); with the
    plan's config's `check_setup`, run in a checkout of `setup_at` — the commit the plan was
    made from (`setup_commit`), never a batch head holding what lanes wrote (issue 59 #4).
    The log says which."""
    config = batch_repo.config
    # what checks of a killed run left
    remove_left_by_dead(scratch_root(batch_repo.repo), SCRATCH_PREFIX)
    confinement = confinement_for(batch_repo, holds_token=holds_token)
    log(confinement.why)
    reach = NetworkReach(config.check_network, "check_network", confined=confinement.active)
    if reach.unheld:
        log("check_network lists hosts, but checks run unconfined here: the list is not held")
    base = setup_at if config.check_setup else None
    return CheckPlace(confinement, path_env, config.check_setup, base, log=log, reach=reach)


def setup_cache_outputs(
    batch_repo: BatchRepo, setup_at: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """The step outputs a job's actions/cache steps use (issue 62 #6): where `check_setup`'s
    result for this plan's digest is kept (`setup-path`) and the key it is saved under
    (`setup-key`: the digest — command, the plan's lockfiles, PATH — and the runner's image,
    so a new image installs anew). Empty without `check_setup`. The place is the one the
    job's no-token step will choose (its PATH is this step's), so the digest is the one its
    checks look up."""
    place = check_place(batch_repo, environ.get("PATH", ""), lambda _: None, holds_token=False,
                        setup_at=setup_at)  # fmt: skip
    try:
        folder = place.folder(batch_repo.repo)
    finally:
        place.close()
    if folder is None:
        return {"setup-key": "", "setup-path": ""}
    image = "-".join(environ.get(name, "") for name in ("ImageOS", "ImageVersion"))
    return {"setup-key": f"imm-check-setup-{image}-{folder.name}", "setup-path": str(folder)}


def setup_commit(batch_repo: BatchRepo, slug: str, *, fresh: bool = False) -> str:
    """Where `check_setup` runs for a pass over `slug`'s batch: the active batch's plan commit,
    else (a batch yet to start, or `--fresh`) the base head it will be planned from."""
    if not fresh:
        stored = StateStore(batch_repo.refs).active(slug)
        if stored is not None:
            return stored.state.judged_at
    return base_of(batch_repo)[1]


def confinement_for(batch_repo: BatchRepo, *, holds_token: bool) -> Confinement:
    """The sandbox the config asks for (`integration_isolation`, the key before it, still
    counts: `none` unconfines, `user` insists)."""
    config = batch_repo.config
    mode = "none" if config.integration_isolation == "none" else config.sandbox
    repo = batch_repo.repo
    folders = list(dict.fromkeys([repo.common_directory(), repo.git_directory()]))
    return choose_confinement(
        mode, holds_credential=holds_token or config.integration_isolation == "user",
        git_folders=folders, exposed=config.sandbox_expose,
        check_network=config.check_network == "open",
        tmpfs_mb=config.sandbox_tmpfs_mb,
    )  # fmt: skip
