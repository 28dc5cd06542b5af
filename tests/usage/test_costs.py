"""Tests for usage/costs.py and the usage ledger behind /parley-admin usage: prices, the archive's rows, metrics."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import genai_prices
from logfire.testing import CaptureLogfire

from archive import TokenUsage
from archive.backends import open_archive
from usage.budget import UsageLedger
from usage.costs import UsageMetrics, cost_of

DAY = date(2026, 11, 20)


def row(member: int, channel: int = 7, **fields: int | str) -> TokenUsage:
    values: dict[str, Any] = {"input_tokens": 1000, "output_tokens": 100, "model": "openai:gpt-4.1-mini", **fields}
    return TokenUsage(DAY, 1, channel, member, **values)


def test_cost_follows_the_price_table_with_cached_input_cheaper() -> None:
    """A row's cost is genai-prices' for its model, cached input tokens at the cached price."""
    usage = row(3, cached_input_tokens=400)
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=100),
        "gpt-4.1-mini",
        provider_id="openai",
    ).total_price
    assert cost_of(usage) == expected
    assert cost_of(usage) < cost_of(row(3))  # type: ignore[operator]


def test_a_model_served_by_an_unknown_provider_is_priced_by_its_name() -> None:
    """LLM_BASE_URL's server is no provider the table knows; its model name still finds the price."""
    assert cost_of(row(3, model="llm-server:gpt-4.1-mini")) == cost_of(row(3))


def test_the_ledger_counts_judge_calls_apart_from_answers() -> None:
    """A judge call adds to judge_calls, not answers, and both count against the server's tokens."""
    ledger = UsageLedger(clock=lambda: datetime(2026, 11, 20, 12, tzinfo=UTC))
    ledger.record(1, 7, 3, 100, 10, model="openai:gpt-4.1-mini")
    ledger.record(1, 7, 3, 50, 5, cached_input_tokens=20, model="openai:gpt-4.1-mini", kind="judge")
    assert ledger.server_tokens(1) == 165
    [kept] = ledger._rows.values()
    assert (kept.answers, kept.judge_calls, kept.input_tokens, kept.cached_input_tokens) == (1, 1, 150, 20)


async def test_the_archive_keeps_usage_per_model_with_cached_tokens_and_judge_calls(archive_url: str) -> None:
    """Rows of two models stay apart; answers, judge calls and cached tokens add up per day."""
    archive = await open_archive(archive_url)
    try:
        archive.record_usage(row(3))
        archive.record_usage(row(3, cached_input_tokens=300))
        archive.record_usage(row(3, model="anthropic:claude-sonnet-4-5", answers=0, judge_calls=1))
        await archive.flush()
        rows = sorted(await archive.guild_usage(1, DAY, DAY), key=lambda r: r.model)
    finally:
        await archive.close()
    assert [(r.model, r.answers, r.judge_calls, r.input_tokens, r.cached_input_tokens) for r in rows] == [
        ("anthropic:claude-sonnet-4-5", 0, 1, 1000, 0),
        ("openai:gpt-4.1-mini", 2, 0, 2000, 300),
    ]


def test_usage_goes_to_logfire_as_metrics(capfire: CaptureLogfire) -> None:
    """Answers, judge calls, tokens by kind and the cost reach Logfire as counters."""
    UsageMetrics()(row(3, cached_input_tokens=200))
    metrics = {metric["name"]: metric for metric in capfire.get_collected_metrics()}
    points = metrics["parley.tokens"]["data"]["data_points"]
    by_kind = {point["attributes"]["kind"]: point["value"] for point in points}
    assert by_kind == {"input": 1000, "cached_input": 200, "output": 100}
    [cost] = metrics["parley.cost"]["data"]["data_points"]
    assert Decimal(str(cost["value"])) == cost_of(row(3, cached_input_tokens=200))
    assert metrics["parley.answers"]["data"]["data_points"][0]["value"] == 1
