"""What the agents cost (issue 45): one executor run's own report, and a task's or a batch's
spend summed over every run — retries and parked attempts too, what was spent, not only what
landed. An agent's report is untrusted input: every field is bounded here, so a forged or huge
one never grows an outcome or the batch state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final, Literal

from pydantic import Field

from imm_action.model.common import StrictModel

ExecutorReport = Literal["auto", "claude-json", "codex-jsonl", "none"]

MAX_USD: Final = 1_000_000.0  # a report above this is not believed
MAX_TOKENS: Final = 10**13
MAX_AGENT_RUNS: Final = 64  # executor runs one lane outcome carries (QA attempts)
# A session id passed back to the agent in IMM_AGENT_SESSION: letters, digits and `._:-` only,
# so no character of an untrusted report reaches a command line the executor builds with it.
SESSION_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

Usd = Annotated[float, Field(ge=0, le=MAX_USD, allow_inf_nan=False)]
Tokens = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
Millis = Annotated[int, Field(ge=0, le=10**12)]


class AgentRun(StrictModel):
    """One executor run's report of itself, as the agent printed it (Claude Code's result
    object, Codex's usage events). None: the report did not say; every field None or 0: the
    run printed no report (its cost is unknown)."""

    cost_usd: Usd | None = None
    input_tokens: Tokens = 0
    output_tokens: Tokens = 0
    cache_read_tokens: Tokens = 0
    cache_creation_tokens: Tokens = 0
    turns: Annotated[int, Field(ge=0, le=10**9)] | None = None
    duration_ms: Millis | None = None
    api_ms: Millis | None = None
    session_id: Annotated[str, Field(pattern=SESSION_PATTERN)] | None = None
    is_error: bool | None = None
    subtype: Annotated[str, Field(max_length=64, pattern=r"^[A-Za-z0-9_.-]*$")] | None = None

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_creation_tokens
        )


class AgentSpend(StrictModel):
    """What executor runs cost, summed: the known cost, tokens, turns and API time, and how
    many runs there were and of those how many said no cost (their cost is unknown, not 0)."""

    cost_usd: Usd = 0.0
    tokens: Tokens = 0
    input_tokens: Tokens = 0
    output_tokens: Tokens = 0
    cache_read_tokens: Tokens = 0
    cache_creation_tokens: Tokens = 0
    turns: Annotated[int, Field(ge=0)] = 0
    api_ms: Annotated[int, Field(ge=0)] = 0
    runs: Annotated[int, Field(ge=0)] = 0
    unknown: Annotated[int, Field(ge=0)] = 0  # runs whose cost no report said
    attempts: Annotated[int, Field(ge=0)] = 0  # lane attempts (outcomes) the runs came from

    @property
    def known(self) -> bool:
        """Did any run say what it cost?"""
        return self.runs > self.unknown

    @property
    def reported(self) -> bool:
        """Did any run report anything (a cost, or tokens)? An executor that is no agent
        reports nothing, and no view shows a cost for it."""
        return self.known or self.tokens > 0

    def plus(self, other: AgentSpend) -> AgentSpend:
        return AgentSpend(
            cost_usd=min(round(self.cost_usd + other.cost_usd, 6), MAX_USD),
            tokens=min(self.tokens + other.tokens, MAX_TOKENS),
            input_tokens=min(self.input_tokens + other.input_tokens, MAX_TOKENS),
            output_tokens=min(self.output_tokens + other.output_tokens, MAX_TOKENS),
            cache_read_tokens=min(self.cache_read_tokens + other.cache_read_tokens, MAX_TOKENS),
            cache_creation_tokens=min(
                self.cache_creation_tokens + other.cache_creation_tokens, MAX_TOKENS
            ),
            turns=self.turns + other.turns,
            api_ms=self.api_ms + other.api_ms,
            runs=self.runs + other.runs,
            unknown=self.unknown + other.unknown,
            attempts=self.attempts + other.attempts,
        )


NO_SPEND: Final = AgentSpend()


def spend_of_runs(runs: Iterable[AgentRun], attempts: int = 1) -> AgentSpend:
    """The spend of one lane attempt: its executor runs, one that said no cost (an empty
    report: the agent printed none) counted as unknown."""
    total = NO_SPEND.model_copy(update={"attempts": attempts})
    for run in runs:
        total = total.plus(
            AgentSpend(
                cost_usd=run.cost_usd or 0.0,
                tokens=min(run.tokens, MAX_TOKENS),
                input_tokens=run.input_tokens,
                output_tokens=run.output_tokens,
                cache_read_tokens=run.cache_read_tokens,
                cache_creation_tokens=run.cache_creation_tokens,
                turns=run.turns or 0,
                api_ms=run.api_ms or 0,
                runs=1,
                unknown=0 if run.cost_usd is not None else 1,
            )
        )
    return total


def summed(spends: Iterable[AgentSpend | None]) -> AgentSpend:
    total = NO_SPEND
    for spend in spends:
        if spend is not None:
            total = total.plus(spend)
    return total
