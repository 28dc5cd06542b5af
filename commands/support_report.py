"""`/parley-admin support report [week|month]`: what the support desk did with the server's questions, and the
questions the documents did not answer, grouped by topic with a link to each, so admins know what to write next.

Manage Server or Manage Channels, checked when it runs. The figures are helpdesk/report.py's, from the decisions and
feedback the archive keeps (so without one there is no report). Only questions in channels the admin may read are
listed (edge/readable.py); those of members who opted out, or erased their data (their decisions are gone), are not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol, cast

import discord

from archive import FeedbackTable
from archive.null import archive_off
from commands.embeds import Field, clip, paginate, reply_embed, send_embeds, server_colour
from commands.tree import Refusal, place_of
from discord_io import discord_time, message_link
from edge.readable import readable_among
from helpdesk.question import SUPPORT_REASONS
from helpdesk.report import SupportFigures, UnansweredQuestion, support_figures
from helpdesk.topics import TopicGrouper

ReportPeriod = Literal["week", "month"]
REPORT_PERIOD_DAYS: dict[str, int] = {"week": 7, "month": 30}
PERIOD_WORDS = {"week": "the last 7 days", "month": "the last 30 days"}
# What the report shows at most: topics, and questions over all of them; the rest are counted.
REPORT_MAX_TOPICS = 10
REPORT_MAX_QUESTIONS = 25
# The unanswered questions grouped (the newest): grouping embeds each one.
REPORT_MAX_GROUPED = 300
# Archived forum posts asked of Discord to know whether the admin may read them.
REPORT_MAX_FETCHED_CHANNELS = 25
TOPIC_TITLE_CHARS = 120
REPORT_TITLE = "The support desk in this server"
NOT_PERMITTED = "You need the Manage Server or Manage Channels permission to see the support report."
NO_ARCHIVE = "The support report reads the decisions and feedback kept in the archive, which is off here."
NONE_UNANSWERED = "None: every question was answered, solved, or answered by a member first."


class SupportReportOperated(Protocol):
    """The client, as `/parley-admin support report` sees it (bot.py's Parley)."""

    @property
    def archive(self) -> FeedbackTable: ...
    @property
    def topics(self) -> TopicGrouper: ...


def may_see_report(permissions: discord.Permissions) -> bool:
    return permissions.manage_guild or permissions.manage_channels


async def answer_support_report(interaction: discord.Interaction, period: str) -> None:
    """Reply to `/parley-admin support report <period>` with the report's embeds, only its user sees; deferred first,
    since grouping the questions by topic reads the embedding model."""
    if not may_see_report(interaction.permissions):
        raise Refusal(NOT_PERMITTED)
    if period not in REPORT_PERIOD_DAYS:
        raise Refusal(f"Unknown period {period!r}: choose week or month.")
    client = cast(SupportReportOperated, interaction.client)
    if archive_off(client.archive):
        raise Refusal(NO_ARCHIVE)
    member, guild = interaction.user, interaction.guild
    assert isinstance(member, discord.Member) and guild is not None  # a server's command (in_a_server)
    await interaction.response.defer(ephemeral=True, thinking=True)
    guild_id, _ = place_of(interaction)
    now = datetime.now(UTC)
    since = now - timedelta(days=REPORT_PERIOD_DAYS[period])
    decisions = await client.archive.support_decisions(guild_id, since, SUPPORT_REASONS)
    figures = support_figures(decisions, await client.archive.guild_feedback(guild_id, since))
    places = {question.channel_id for question in figures.unanswered}
    readable = await readable_among(guild, member, places, fetch_at_most=REPORT_MAX_FETCHED_CHANNELS)
    shown = [question for question in figures.unanswered if question.channel_id in readable][-REPORT_MAX_GROUPED:]
    groups = await client.topics.group([question.excerpt for question in shown])
    topics = [[shown[index] for index in group] for group in groups]
    hidden = len(figures.unanswered) - len(shown) + figures.unlisted
    embeds = report_embeds(figures, topics, guild_id, period, server_colour(guild), as_of=now, hidden=hidden)
    await send_embeds(interaction, embeds)


def report_embeds(
    figures: SupportFigures,
    topics: list[list[UnansweredQuestion]],
    guild_id: int,
    period: str,
    colour: discord.Colour,
    *,
    as_of: datetime,
    hidden: int,
) -> list[discord.Embed]:
    """The figures, then a field per topic (at most REPORT_MAX_TOPICS, REPORT_MAX_QUESTIONS questions in all) with
    a link to each question; what is left out is counted."""
    head = reply_embed(
        REPORT_TITLE,
        colour,
        description=f"**{PERIOD_WORDS[period].capitalize()}:**\n{describe_figures(figures)}",
        footer="Questions are grouped by topic, each topic titled by its most typical question.",
        timestamp=as_of,
    )
    fields: list[Field] = []
    room = REPORT_MAX_QUESTIONS
    for questions in topics[:REPORT_MAX_TOPICS]:
        if room == 0:
            break
        title = discord.utils.escape_markdown(clip(questions[0].excerpt or "(no text)", TOPIC_TITLE_CHARS))
        lines = [_question_line(question, guild_id) for question in questions[:room]]
        room -= len(lines)
        left = len(questions) - len(lines)
        fields.append(Field(f"{title} ({len(questions)})", "\n".join(lines + ([f"… and {left} more"] if left else []))))
    shown = REPORT_MAX_QUESTIONS - room
    notes = _left_out(sum(map(len, topics)) - shown, len(topics) - len(fields), hidden)
    if not topics:
        fields.append(Field("Unanswered questions", NONE_UNANSWERED))
    if notes:
        fields.append(Field("Not shown", notes))
    return paginate(head, fields)


def describe_figures(figures: SupportFigures) -> str:
    return (
        f"Questions asked: **{figures.asked}**\nAnswered from the documents: **{figures.answered}**\n"
        f"Marked solved: **{figures.solved}**\nMarked not helpful: **{figures.not_helpful}**\n"
        f"Handed off to staff: **{figures.handed_off}**\n"
        f"Unanswered: **{len(figures.unanswered) + figures.unlisted}**"
    )


def _question_line(question: UnansweredQuestion, guild_id: int) -> str:
    link = message_link(guild_id, question.channel_id, question.message_id)
    text = discord.utils.escape_markdown(clip(question.excerpt or "(no text)", 150))
    return f"[jump]({link}) {discord_time(question.decided_at)} {text}"


def _left_out(questions: int, topics: int, hidden: int) -> str:
    """What the report leaves out, in a line each; empty if nothing."""
    lines = []
    if questions:
        more = f", {topics} more topic(s)" if topics else ""
        lines.append(f"{questions} more unanswered question(s){more}.")
    if hidden:
        lines.append(
            f"{hidden} unanswered question(s) in channels you may not read, or by members who opted out, are not"
            " listed."
        )
    return "\n".join(lines)
