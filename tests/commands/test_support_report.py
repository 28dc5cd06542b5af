"""commands/support_report.py: the support report's embeds, bounded (topics and questions shown, the rest counted),
with members' words shown as text; and who may see it. End to end: tests/e2e/test_e2e_support_feedback.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import discord

from commands.support_report import (
    NONE_UNANSWERED,
    REPORT_MAX_QUESTIONS,
    REPORT_MAX_TOPICS,
    may_see_report,
    report_embeds,
)
from helpdesk.report import SupportFigures, UnansweredQuestion
from tests.support.e2e_support import embed_text

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
GUILD, CHANNEL = 10, 1


def question(number: int, text: str | None = None) -> UnansweredQuestion:
    return UnansweredQuestion(CHANNEL, 1000 + number, text or f"question number {number}", NOW)


def shown(topics: list[list[UnansweredQuestion]], hidden: int = 0) -> str:
    figures = SupportFigures(9, 3, 1, 1, 2, [q for topic in topics for q in topic], 0)
    embeds = report_embeds(figures, topics, GUILD, "week", discord.Colour.default(), as_of=NOW, hidden=hidden)
    return "\n".join(embed_text(embed.to_dict()) for embed in embeds)  # type: ignore[arg-type]


def test_the_figures_head_the_report() -> None:
    text = shown([])
    assert "Questions asked: **9**" in text and "Answered from the documents: **3**" in text
    assert "Marked solved: **1**" in text and "Handed off to staff: **2**" in text
    assert NONE_UNANSWERED in text


def test_at_most_so_many_topics_and_questions_are_shown_and_the_rest_counted() -> None:
    topics = [[question(topic * 10 + n) for n in range(4)] for topic in range(REPORT_MAX_TOPICS + 3)]
    text = shown(topics, hidden=2)

    links = text.count("https://discord.com/channels/")
    assert links == REPORT_MAX_QUESTIONS
    total = sum(map(len, topics))
    assert f"{total - REPORT_MAX_QUESTIONS} more unanswered question(s)" in text
    assert "2 unanswered question(s) in channels you may not read, or by members who opted out" in text
    assert "question number 0 (4)" in text  # a topic named by its first (most central) question, and its size


def test_a_topics_questions_link_to_their_messages() -> None:
    text = shown([[question(1), question(2)]])
    assert f"[jump](https://discord.com/channels/{GUILD}/{CHANNEL}/1001)" in text
    assert f"[jump](https://discord.com/channels/{GUILD}/{CHANNEL}/1002)" in text
    assert "Not shown" not in text


def test_a_members_words_are_shown_as_text_not_as_links_or_formatting() -> None:
    text = shown([[question(1, "[free nitro](https://evil.example) **now**")]])
    assert re.search(r"(?<!\\)\[free nitro\]", text) is None  # no unescaped masked link
    assert r"\[free nitro](https://evil.example) \*\*now\*\*" in text


def test_manage_server_or_manage_channels_may_see_it() -> None:
    assert may_see_report(discord.Permissions(manage_guild=True))
    assert may_see_report(discord.Permissions(manage_channels=True))
    assert not may_see_report(discord.Permissions(manage_messages=True, read_message_history=True))
