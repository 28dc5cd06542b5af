"""A case's card (moderation/cards.py): what it shows open and closed, and the buttons it offers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from moderation.cards import CLOSED_TEXT, NO_TEXT, case_embed, case_view, timeout_of
from records import CaseReport, ModerationAction, ModerationCase

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
OPEN = ModerationCase(7, 1, 2, 3, 4, "line one\nline two", "report", NOW, 1, "No spam", 0.42, "spams a link")


def text_of(case: ModerationCase, reports: list[CaseReport], actions: list[ModerationAction]) -> str:
    embed = case_embed(case, reports, actions)
    fields = [f"{field.name}: {field.value}" for field in embed.fields]
    return "\n".join([embed.title or "", embed.description or "", *fields, embed.footer.text or ""])


def test_an_open_case_quotes_the_message_and_shows_the_reading_reports_and_actions() -> None:
    reports = [CaseReport(7, 100 + n, f"reason {n}", NOW) for n in range(7)]
    timed_out = ModerationAction(1, 2, "timeout", 900, None, 4, None, "1 hour", 7, NOW)
    text = text_of(OPEN, reports, [timed_out])
    assert "> line one\n> line two" in text and "https://discord.com/channels/1/2/3" in text
    assert "<@100>, <@101>, <@102>, <@103>, <@104> and 2 more" in text and "reason 2" in text and "reason 3" not in text
    assert "No spam" in text and "42%" in text and "spams a link" in text
    assert "<@900> timed the author out for 1 hour" in text and text.endswith("Open")
    assert [item.custom_id for item in case_view(OPEN).children] == [  # type: ignore[union-attr]
        "parley:case:7:delete", "parley:case:7:timeout-600", "parley:case:7:timeout-3600",
        "parley:case:7:timeout-86400", "parley:case:7:warn", "parley:case:7:dismiss",
    ]  # fmt: skip


def test_a_closed_case_shows_no_text_and_no_buttons() -> None:
    closed = replace(OPEN, content="", summary="", closed_at=NOW, closed_by=900)
    text = text_of(closed, [], [])
    assert CLOSED_TEXT in text and "line one" not in text and text.endswith("Closed")
    assert case_view(closed) is None


def test_a_flag_and_a_case_without_text_say_so() -> None:
    flagged = replace(OPEN, source="watch", reporters=0, content="")
    text = text_of(flagged, [], [])
    assert "a flagged message" in text and "Flagged by: the watch list" in text and NO_TEXT in text


def test_only_the_cards_durations_are_timeouts() -> None:
    assert timeout_of("timeout-3600") == timedelta(hours=1)
    assert timeout_of("timeout-5") is None and timeout_of("delete") is None
