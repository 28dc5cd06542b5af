"""The footer under an answer (`footer` in a channel's profile, ANSWER_FOOTER by default): the tokens it spent and,
where the price table knows its model, what that cost; read from the very row the usage report counts."""

from __future__ import annotations

from archive import TokenUsage
from usage.costs import Totals, cost_of, format_cost

FOOTER_OFF = "off"
FOOTER_COST = "cost"


def answer_footer(mode: str, spent: TokenUsage | None) -> str | None:
    """The footer line for an answer that spent `spent` (None: nothing counted), or None where it shows none."""
    if mode == FOOTER_OFF or spent is None:
        return None
    tokens = f"{spent.total_tokens:,} tokens ({spent.input_tokens:,} in, {spent.output_tokens:,} out)"
    if mode != FOOTER_COST:
        return tokens
    cost = cost_of(spent)
    return f"{tokens} · {'no price known for ' + spent.model if cost is None else '≈ ' + format_cost(cost)}"


def day_so_far(totals: Totals) -> str:
    """A member's tokens today, and their estimated cost where every model is priced."""
    cost = "" if totals.unpriced else f" (≈ {format_cost(totals.cost)})"
    return f"{totals.tokens:,} tokens{cost}"
