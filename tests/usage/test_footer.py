"""The footer under an answer (usage/footer.py): its tokens, and its cost where the price table knows the model."""

from __future__ import annotations

from datetime import date

from archive import TokenUsage
from usage.costs import Totals, cost_of, format_cost
from usage.footer import answer_footer, day_so_far

PRICED = TokenUsage(date(2026, 11, 28), 10, 1, 7, 1200, 300, cached_input_tokens=1000, model="openai:gpt-4.1-mini")
UNPRICED = TokenUsage(date(2026, 11, 28), 10, 1, 7, 1200, 300, model="local:my-own-model")


def test_off_or_nothing_spent_shows_no_footer() -> None:
    assert answer_footer("off", PRICED) is None
    assert answer_footer("cost", None) is None


def test_tokens_show_in_and_out() -> None:
    assert answer_footer("tokens", PRICED) == "1,500 tokens (1,200 in, 300 out)"


def test_cost_is_the_price_tables_for_the_row() -> None:
    cost = cost_of(PRICED)
    assert cost is not None and cost > 0
    assert answer_footer("cost", PRICED) == f"1,500 tokens (1,200 in, 300 out) · ≈ {format_cost(cost)}"


def test_an_unpriced_model_says_so_instead_of_a_cost() -> None:
    assert answer_footer("cost", UNPRICED) == "1,500 tokens (1,200 in, 300 out) · no price known for local:my-own-model"


def test_a_day_with_an_unpriced_model_shows_no_cost() -> None:
    priced, mixed = Totals(), Totals()
    priced.add(PRICED)
    mixed.add(PRICED)
    mixed.add(UNPRICED)
    assert day_so_far(priced) == f"1,500 tokens (≈ {format_cost(priced.cost)})"
    assert day_so_far(mixed) == "3,000 tokens"
