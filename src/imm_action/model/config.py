"""Repository config `.github/imm.yml` (SPEC §4.8)."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterable, Sequence
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from imm_action.model.common import Identifier, StrictModel
from imm_action.model.descriptor import (
    DescriptorCommand,
    DescriptorEnvironment,
    ReadPaths,
    ReportPath,
)
from imm_action.model.ledger import TestId
from imm_action.model.network import NetworkPolicy
from imm_action.model.plan import DEFAULT_QA_FAILURE_LIMIT, MAX_PARALLEL_LIMIT
from imm_action.model.shard import DEFAULT_FAN_OUT_SECONDS, MAX_SHARDS
from imm_action.model.spend import ExecutorReport, Usd
from imm_action.model.validation import LINE_FORM, MAPPING_FORM

CONFIG_PATH = ".github/imm.yml"
MAX_LISTED_FLAKY = 200


def _splits(text: str) -> str:
    """A command line imm will split with shlex (never a shell): refused here when it cannot be
    split, not later by every lane."""
    try:
        argv = shlex.split(text)
    except ValueError as error:
        raise ValueError(f"cannot be split into arguments: {error}") from None
    if not argv:
        raise ValueError("the command is empty")
    return text


CommandLine = Annotated[str, AfterValidator(_splits)]


def line_command(text: str) -> DescriptorCommand:
    """A branch check's command line as the descriptor's command it runs as (SPEC §4.3)."""
    argv = shlex.split(text)
    return DescriptorCommand(executable=argv[0], argv=argv[1:])


def _runs_as_a_descriptor(text: str) -> str:
    """Refused here, at its line, when it could not run as a descriptor's command — not once a
    batch has started."""
    try:
        line_command(text)
    except ValidationError as error:
        raise ValueError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
    return text


BranchCommandLine = Annotated[CommandLine, AfterValidator(_runs_as_a_descriptor)]


def _no_spec_binding(value: bool) -> bool:
    """immune-brain's spec-pair exclusion has no counterpart here (ADR 0042): `true` is refused
    rather than silently ignored; `false` is accepted so older configs stay valid."""
    if value:
        raise ValueError(
            "true is not supported: imm plans from task intents and binds no spec pairs "
            "(docs/decisions/0042); remove the key"
        )
    return value


DEFAULT_MAX_PARALLEL = 4

Permission = Literal["read", "triage", "write", "maintain", "admin"]


class _ConfigModel(BaseModel):
    # Unknown keys warn (with their line) instead of failing: the loader reports them, so the
    # model itself ignores them and stays readable by older versions of imm.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class CommandsConfig(_ConfigModel):
    allowed_permission: Permission = "write"


def _form(value: object) -> str | None:
    """Which form a command was written in — a line, or a mapping of its fields — so that only
    that form's problems are reported, never every form's at once."""
    if isinstance(value, str):
        return LINE_FORM
    if isinstance(value, dict | BaseModel):
        return MAPPING_FORM
    return None


def _line_or_mapping(what: str) -> Discriminator:
    return Discriminator(
        _form,
        custom_error_type="line_or_mapping",
        custom_error_message=f"must be a command line, or a mapping with {what}",
    )


class BranchCheck(StrictModel):
    """A check every move of the batch branch must pass, owned by no task (issue 44): a
    command line (no shell) or a descriptor's command, with what it reads and its own
    environment, as a task's check has (SPEC §4.3)."""

    name: Identifier | None = None  # its id is `branch:<name>` (default: its position)
    command: Annotated[
        Annotated[BranchCommandLine, Tag(LINE_FORM)]
        | Annotated[DescriptorCommand, Tag(MAPPING_FORM)],
        _line_or_mapping("an executable (and its argv, cwd, timeout_ms, max_output_bytes)"),
    ]
    environment: DescriptorEnvironment | None = None
    reads: ReadPaths | None = None
    report: ReportPath | None = None  # where its runner writes its test report (issue 58)


BRANCH_CHECK_PREFIX = "branch:"
MAX_BRANCH_CHECKS = 32
BranchCheckItem = Annotated[
    Annotated[BranchCommandLine, Tag(LINE_FORM)] | Annotated[BranchCheck, Tag(MAPPING_FORM)],
    _line_or_mapping("a command (and a name, an environment, the paths it reads)"),
]
BranchChecks = Annotated[list[BranchCheckItem], Field(max_length=MAX_BRANCH_CHECKS)]


def _one_is_a_list(value: object) -> object:
    """One branch check written alone (a command line, a mapping) is a list of one."""
    return [value] if isinstance(value, str | dict) else value


def branch_check_name(item: str | BranchCheck, position: int) -> str:
    """The name in a branch check's id `branch:<name>`: its own, else its position (from 1)."""
    return (item.name if isinstance(item, BranchCheck) else None) or str(position)


def branch_check_id(item: str | BranchCheck, position: int) -> str:
    """A branch check's id, by which its verdicts and failures are reported: `branch:<name>`."""
    return f"{BRANCH_CHECK_PREFIX}{branch_check_name(item, position)}"


def branch_check_ids(checks: Sequence[str | BranchCheck]) -> dict[str, str]:
    """Each branch check's id (`branch:<name>`), with its name."""
    return {
        branch_check_id(item, at): branch_check_name(item, at)
        for at, item in enumerate(checks, start=1)
    }


HeldChecks = Literal["all", "branch"]


# A name git writes into a commit header: no angle brackets or control characters, which would
# forge or break the header.
PersonName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^<>\x00-\x1f\x7f]+$")]
PersonEmail = Annotated[
    str,
    Field(min_length=3, max_length=254, pattern=r"^[^<>\s\x00-\x1f\x7f]+@[^<>\s\x00-\x1f\x7f]+$"),
]


class CommitterConfig(_ConfigModel):
    """Who commits a batch's lane commits and candidates (default imm-action)."""

    name: PersonName
    email: PersonEmail


IntegrationIsolation = Literal["auto", "user", "none"]  # decision 0031, kept for old files
SandboxMode = Literal["auto", "sudo", "none"]  # decision 0048


class RepoConfig(_ConfigModel):
    max_parallel: Annotated[int, Field(ge=1, le=MAX_PARALLEL_LIMIT)] = DEFAULT_MAX_PARALLEL
    executor: CommandLine | None = None
    lane_setup: CommandLine | None = None
    qa_failure_limit: Annotated[int, Field(ge=1)] = DEFAULT_QA_FAILURE_LIMIT
    lane_timeout_minutes: Annotated[int, Field(ge=1, le=360)] = 60
    # A GitHub lane job still queued after this long is a lost lane (SPEC §5.2 step 4).
    lane_queue_timeout_minutes: Annotated[int, Field(ge=1, le=1440)] = 30
    base_ref: str | None = None
    barrier_files: list[str] = Field(default_factory=list)
    require_spec_binding: Annotated[bool, AfterValidator(_no_spec_binding)] = False
    # At most this many tasks of a batch get a lane (the plan's budget, SPEC §4.5); None: all
    # enrollable. A batch that used it stops as `budget_stopped`; `imm run` continues it.
    max_children: Annotated[int, Field(ge=1)] | None = None
    # The committer of lane commits, the candidates built from them and a continuation's merge
    # of the base branch; imm's own bookkeeping commits (state, outcomes) stay imm-action's.
    committer: CommitterConfig | None = None
    commands: CommandsConfig = Field(default_factory=CommandsConfig)
    # Variables of the caller's environment passed to executors besides the built-in allowlist
    # (docs/how-it-works.md, "What an executor sees"); GITHUB_TOKEN, GH_TOKEN, ACTIONS_* never pass.
    executor_env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]] = Field(
        default_factory=list
    )
    # Checks the integrator runs at once, pulled from one queue longest first; None: one per
    # core, and up to four per core while cores sit idle (decision 0049).
    verify_parallel: Annotated[int, Field(ge=1, le=MAX_PARALLEL_LIMIT)] | None = None
    # On GitHub, the verify jobs a round's checks may fan out to (decision 0054), each on a
    # runner of its own; None: up to 8; 0: never...
    verify_runners: Annotated[int, Field(ge=0, le=MAX_SHARDS)] | None = None
    # ...when they would keep it busy longer than this many seconds (by each check's last
    # recorded duration; a minute for one never timed). 0: whenever there is a check to run.
    verify_fan_out_seconds: Annotated[int, Field(ge=0, le=86_400)] = DEFAULT_FAN_OUT_SECONDS
    close_integrated_issues: bool = False  # close a GitHub-carried task's issue once integrated
    # How lane code (executors, lane_setup, checks, check_setup) is sandboxed (SPEC §8,
    # decision 0048): `auto` in bubblewrap, through passwordless sudo where the kernel lets no
    # user make namespaces; `sudo` always through sudo; `none` unconfined (refused otherwise
    # where no sandbox works while imm holds a credential).
    sandbox: SandboxMode = "auto"
    # Paths lane code may see that the sandbox hides by default (an agent's own config folder,
    # `~/.claude`): shown read-only, and copied into an executor's own home.
    sandbox_expose: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    # What network lane code reaches (issue 60, decision 0070): `open` (the host's), `none`, or
    # a list of hosts (`api.anthropic.com`, `*.pythonhosted.org`, `registry.npmjs.org:443`)
    # reached only through imm's proxy. `lane_network`: executors and `lane_setup`;
    # `check_network`: checks and `check_setup` (`true`/`false` are `open`/`none`).
    lane_network: NetworkPolicy = "open"
    check_network: NetworkPolicy = "open"
    # The size of each sandboxed command's own /tmp and /var/tmp, in MiB (ADR 0059); unset: an
    # eighth of the machine's memory, between 64 MiB and 1 GiB.
    sandbox_tmpfs_mb: Annotated[int, Field(ge=16, le=1 << 20)] | None = None
    # Before decision 0048: `none` is `sandbox: none`; `user` insists on a sandbox.
    integration_isolation: IntegrationIsolation = "auto"
    # Prepares the environment every check runs in, lanes' and integration's alike, in the
    # sandbox, in a checkout of the base (decisions 0032, 0048); kept and reused while the
    # command, the base's lockfiles and PATH are unchanged. What it installs into $HOME (a venv
    # at $HOME/.venv, `pip install --user`) is on the checks' PATH, and what it leaves in its
    # tree (node_modules, .venv) is in every check's tree, read-only.
    check_setup: CommandLine | None = None
    # Checks of the repository's own (its suite, lint, types) every move of imm/<slug> must
    # pass, owned by no task, verified on the base before any lane starts (issue 44, ADR 0061).
    # One command line, or one mapping, is a list of one (issue 62 #2: `branch_checks: python
    # -m pytest -q` was refused with "Input should be a valid list").
    branch_checks: Annotated[
        BranchChecks,
        BeforeValidator(_one_is_a_list, json_schema_input_type=BranchCheckItem | BranchChecks),
    ] = Field(default_factory=list)
    # What gates a move besides the branch checks: `all` (every task's checks the branch holds,
    # and the moving lanes'), or `branch` (the moving lanes' own checks only: for a suite that
    # holds the tasks' tests; ADR 0061).
    held_checks: HeldChecks = "all"
    # Tests known to be flaky (issue 61, ADR 0071): their failures are reported (the status,
    # the comment, the summary) and never block a move nor park a lane. Ids as the test
    # reports name them (`tests/test_io.py::test_timeout`), or a check's id (`branch:1`).
    flaky_tests: Annotated[list[TestId], Field(max_length=MAX_LISTED_FLAKY)] = Field(
        default_factory=list
    )
    # A lane whose dependencies' lanes have committed, not yet landed, starts on a base holding
    # their changes instead of waiting for them to land (issue 61, ADR 0072); it lands only
    # after them, and is set back when one is parked.
    speculative_lanes: bool = True
    # How an executor reports what it cost (issue 45, ADR 0062): `auto` (Claude Code's result
    # object or Codex's usage events, whichever its standard output holds), one of them only,
    # or `none`. A report absent or malformed never fails a lane: its cost is unknown.
    executor_report: ExecutorReport = "auto"
    # No new lane starts once the agents' known spend reaches this many US dollars (issue 45);
    # the lanes in flight finish and land, then the batch stops as `budget_stopped`.
    max_cost_usd: Usd | None = None

    @field_validator("held_checks")
    @classmethod
    def _branch_needs_branch_checks(cls, held: HeldChecks, info: ValidationInfo) -> HeldChecks:
        # judged after branch_checks (declared first); absent there when they were invalid
        if held == "branch" and info.data.get("branch_checks") == []:
            raise ValueError(
                "branch leaves later moves to the branch checks alone, and branch_checks names "
                "none: add the repository's suite there, or remove held_checks"
            )
        return held

    @field_validator("branch_checks")
    @classmethod
    def _each_branch_check_its_own_id(
        cls, checks: list[str | BranchCheck]
    ) -> list[str | BranchCheck]:
        # verdicts and failures are reported by id: two of one id leave a reader guessing
        seen: dict[str, int] = {}
        for position, item in enumerate(checks, start=1):
            name = branch_check_name(item, position)
            if name in seen:
                raise ValueError(
                    f"items {seen[name]} and {position} are both "
                    f"{branch_check_id(item, position)}: give each a name of its own"
                )
            seen[name] = position
        return checks


# Keys whose misspelling would silently weaken a guard: `chek_network: false` leaves checks
# their network, `sanbox: sudo` the sandbox as it was. An unknown key one edit away from one
# of these is refused, not warned about (ADR 0060).
GATING_KEYS = frozenset(
    {"sandbox", "sandbox_expose", "check_network", "lane_network", "check_setup",
     "barrier_files",
     "max_children", "qa_failure_limit", "integration_isolation", "executor_env",
     "branch_checks", "held_checks", "max_cost_usd", "flaky_tests"}
)  # fmt: skip


def one_edit_apart(left: str, right: str) -> bool:
    """Whether one insertion, deletion, substitution or swap of neighbours turns `left` into
    `right` (and they differ)."""
    if left == right or abs(len(left) - len(right)) > 1:
        return False
    if len(left) == len(right):
        differ = [at for at in range(len(left)) if left[at] != right[at]]
        if len(differ) == 1:
            return True
        first, second = differ[0], differ[-1]
        return (
            len(differ) == 2 and second == first + 1
            and left[first] == right[second] and left[second] == right[first]
        )  # fmt: skip
    short, long = sorted((left, right), key=len)
    return any(long[:at] + long[at + 1 :] == short for at in range(len(long)))


def meant_key(key: str, known: Iterable[str]) -> str | None:
    """The known key `key` most likely misspells, if any is close."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return close[0] if close else None
