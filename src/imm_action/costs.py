"""What the agents cost, in words (pure, issue 45): one run, a task's spend, a batch's line
("12 tasks, $4.31, 1.2 M tokens; the costliest: b $0.92 over 2 attempts"). Every view that shows
a cost — `imm status`, `imm run`'s report, the status comment, the job summaries — says it
through here."""

from __future__ import annotations

from collections.abc import Sequence

from imm_action.model.spend import AgentRun, AgentSpend, summed
from imm_action.text import plural


def money(usd: float) -> str:
    """`$4.31`; a spend under a cent with four decimals (`$0.0042`), never as `$0.00`."""
    if 0 < usd < 0.01:
        return f"${usd:.4f}"
    return f"${usd:,.2f}"


def token_count(tokens: int) -> str:
    """`1.2 M tokens`, `830 k tokens`, `512 tokens`."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f} M tokens"
    if tokens >= 10_000:
        return f"{tokens / 1000:.0f} k tokens"
    if tokens >= 1000:
        return f"{tokens / 1000:.1f} k tokens"
    return plural(tokens, "token")


def run_line(run: AgentRun) -> str:
    """One executor run, as the lane log says it: `$0.12, 34.5 k tokens, 7 turns`."""
    parts = [money(run.cost_usd) if run.cost_usd is not None else "cost unknown"]
    if run.tokens:
        parts.append(token_count(run.tokens))
    if run.turns is not None:
        parts.append(plural(run.turns, "turn"))
    if run.is_error:
        parts.append(f"ended in error ({run.subtype or 'unknown'})")
    return ", ".join(parts)


def cost_cell(spend: AgentSpend | None) -> str:
    """A task's cost in a table: `$0.92`, `$0.92 + 1 unknown`, `unknown`, or `—` (no run)."""
    if spend is None or not spend.runs:
        return "—"
    if not spend.known:
        return "unknown"
    unknown = f" + {spend.unknown} unknown" if spend.unknown else ""
    return f"{money(spend.cost_usd)}{unknown}"


def spend_text(spend: AgentSpend) -> str:
    """`$4.31, 1.2 M tokens` with the runs whose cost no report said: `(2 runs unknown)`."""
    parts = [money(spend.cost_usd) if spend.known else "cost unknown"]
    if spend.tokens:
        parts.append(token_count(spend.tokens))
    text = ", ".join(parts)
    if spend.known and spend.unknown:
        text += f" ({plural(spend.unknown, 'run')} of unknown cost)"
    return text


def batch_cost_line(
    spends: Sequence[tuple[str, AgentSpend | None]],
    before: AgentSpend | None = None,
    limit: float | None = None,
) -> str | None:
    """The batch's cost line, or None when no agent ran yet: what every task's runs cost,
    the costliest task, what the batches it continues spent and what is left of the budget.
    None too when no run reported anything: the executor is no agent that reports."""
    ran = [(task, spend) for task, spend in spends if spend is not None and spend.runs]
    if not any(spend.reported for _, spend in ran) and not (before and before.reported):
        return None
    total = summed(spend for _, spend in ran)
    line = f"agents: {plural(len(ran), 'task')}, {spend_text(total)}"
    known = [(task, spend) for task, spend in ran if spend.known]
    if len({spend.cost_usd for _, spend in known}) > 1:  # nothing to single out when equal
        task, costliest = max(known, key=lambda item: item[1].cost_usd)
        line += (
            f"; the costliest: {task} {money(costliest.cost_usd)} over "
            f"{plural(costliest.attempts, 'attempt')}"
        )
    if before is not None and before.runs:
        line += f"; {money(before.cost_usd)} before, in the batches it continues"
    if limit is not None:
        spent = total.cost_usd + (before.cost_usd if before else 0.0)
        line += f"; {money(max(limit - spent, 0.0))} left of max_cost_usd {money(limit)}"
    return line
