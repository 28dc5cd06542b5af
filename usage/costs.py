"""What Parley's model calls cost: `/parley-admin usage`'s figures per channel and member, and the same as Logfire
metrics.

Prices come from genai-prices, the price table pydantic-ai itself uses for `ModelResponse.cost()`: its
bundled snapshot, never fetched at run time, so the table's version is the package's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

import genai_prices
import logfire
from pydantic_ai.models import Model

from archive import TokenUsage

PRICE_TABLE = f"genai-prices {genai_prices.__version__}"
PERIOD_DAYS = {"day": 1, "week": 7, "month": 30}


def model_label(model: Model | str | None) -> str:
    """`provider:model` for a model, as usage rows name it (what its price is looked up by)."""
    if isinstance(model, Model):
        return f"{model.system}:{model.model_name}"
    return model or ""


@lru_cache(maxsize=256)
def _price_per_token(model: str) -> tuple[Decimal, Decimal, Decimal] | None:
    """Per-token prices (uncached input, cached input, output) of `provider:model`, or None if the table lacks it.

    Looked up under the provider first, then by the model's name alone: an OpenAI-compatible server at
    LLM_BASE_URL is a provider the table does not know, serving models it may well know.
    """
    provider, _, name = model.rpartition(":")
    million = 1_000_000
    for provider_id in dict.fromkeys([provider or None, None]):
        try:
            plain = genai_prices.calc_price(genai_prices.Usage(input_tokens=million), name, provider_id=provider_id)
            cached = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=million, cache_read_tokens=million), name, provider_id=provider_id
            )
            out = genai_prices.calc_price(genai_prices.Usage(output_tokens=million), name, provider_id=provider_id)
        except LookupError:
            continue
        return plain.total_price / million, cached.total_price / million, out.total_price / million
    return None


def cost_of(usage: TokenUsage) -> Decimal | None:
    """The row's estimated cost in US dollars, or None when the price table has no price for its model."""
    prices = _price_per_token(usage.model) if usage.model else None
    if prices is None:
        return None
    plain, cached, output = prices
    uncached = max(usage.input_tokens - usage.cached_input_tokens, 0)
    return uncached * plain + usage.cached_input_tokens * cached + usage.output_tokens * output


@dataclass
class Totals:
    """Answers, judge calls, tokens and cost summed over usage rows."""

    answers: int = 0
    judge_calls: int = 0
    images: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    # Models the table has no price for; their tokens are not in `cost`.
    unpriced: set[str] = field(default_factory=set)

    def add(self, usage: TokenUsage) -> None:
        self.answers += usage.answers
        self.judge_calls += usage.judge_calls
        self.images += usage.images
        self.input_tokens += usage.input_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.output_tokens += usage.output_tokens
        cost = cost_of(usage)
        if cost is None:
            self.unpriced.add(usage.model or "unknown")
        else:
            self.cost += cost

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class UsageReport:
    """A server's usage over a period, in total, per channel and per member."""

    total: Totals = field(default_factory=Totals)
    channels: dict[int, Totals] = field(default_factory=dict)
    members: dict[int, Totals] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[TokenUsage]) -> UsageReport:
        report = cls()
        for row in rows:
            report.total.add(row)
            report.channels.setdefault(row.channel_id, Totals()).add(row)
            report.members.setdefault(row.member_id, Totals()).add(row)
        return report


def describe_totals(totals: Totals) -> str:
    """One line of figures: answers, judge calls, images made (when any were), tokens (input, of which cached,
    output) and the cost."""
    cached = f" ({totals.cached_input_tokens:,} cached)" if totals.cached_input_tokens else ""
    images = f", {totals.images:,} images" if totals.images else ""
    return (
        f"{totals.answers:,} answers, {totals.judge_calls:,} judge calls{images}; {totals.input_tokens:,} input"
        f" tokens{cached},"
        f" {totals.output_tokens:,} output; {format_cost(totals.cost)}"
    )


def format_cost(cost: Decimal) -> str:
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


class UsageMetrics:
    """Every usage record as Logfire metrics: answers, judge calls, tokens by kind, and the estimated cost.

    Attributes name the server, channel, member and model, so the figures of `/parley usage` can be
    charted and summed in Logfire the same way.
    """

    def __init__(self) -> None:
        self.answers = logfire.metric_counter("parley.answers", unit="1", description="Answers Parley gave")
        self.judge_calls = logfire.metric_counter("parley.judge_calls", unit="1", description="LLM judge calls")
        self.images = logfire.metric_counter("parley.images", unit="1", description="Images Parley made")
        self.tokens = logfire.metric_counter(
            "parley.tokens",
            unit="{token}",
            description="Model tokens by kind: input (cached included), cached_input, output",
        )
        self.cost = logfire.metric_counter("parley.cost", unit="USD", description=f"Estimated cost ({PRICE_TABLE})")

    def __call__(self, usage: TokenUsage) -> None:
        attributes: dict[str, Any] = {
            "guild_id": usage.guild_id,
            "channel_id": usage.channel_id,
            "member_id": usage.member_id,
            "model": usage.model,
        }
        self.answers.add(usage.answers, attributes)
        self.judge_calls.add(usage.judge_calls, attributes)
        self.images.add(usage.images, attributes)
        for kind, count in (
            ("input", usage.input_tokens),
            ("cached_input", usage.cached_input_tokens),
            ("output", usage.output_tokens),
        ):
            self.tokens.add(count, {**attributes, "kind": kind})
        cost = cost_of(usage)
        if cost is not None:
            self.cost.add(float(cost), attributes)
