"""`/parley-admin usage`'s reply: the server's figures in total, per channel and per member, as embeds; for a week or a
month, with a chart of each day's tokens and cost by channel."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Protocol, cast

import discord

from archive import Archive, TokenUsage
from archive.null import archive_off
from commands.embeds import Field, lines_fields, paginate, reply_embed, send_embeds, server_colour
from commands.tree import place_of
from commands.usage_chart import daily_usage, usage_chart_png
from usage.budget import NO_MEMBER, UsageLedger
from usage.costs import PERIOD_DAYS, PRICE_TABLE, Totals, UsageReport, describe_totals


class UsageOperated(Protocol):
    """The client, as /parley-admin usage see it (bot.py's Parley)."""

    @property
    def archive(self) -> Archive: ...
    @property
    def usage(self) -> UsageLedger: ...


def operated(interaction: discord.Interaction) -> UsageOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(UsageOperated, interaction.client)


PERIOD_WORDS = {"day": "today (UTC)", "week": "the last 7 days (UTC, today included)", "month": "the last 30 days"}
# Lines per section: the biggest spenders first.
USAGE_MAX_ROWS = 15
USAGE_TITLE = "Parley's model usage in this server"
CHART_FILE = "usage.png"
ARCHIVE_OFF = "Only today's figures: the archive, which keeps earlier days, is off."
CHART_FAILED = "The chart could not be drawn; the details are in Parley's log."

log = logging.getLogger("parley")


async def answer_usage(interaction: discord.Interaction, period: str) -> None:
    """Reply to `/parley-admin usage <period>`: the figures, and for a week or a month the chart drawn off the event
    loop (the interaction is deferred first: drawing and the archive's read may take more than Discord's 3 seconds)."""
    guild_id, _ = place_of(interaction)
    client = operated(interaction)
    days = PERIOD_DAYS[period]
    kept = not archive_off(client.archive)  # earlier days are read from the archive
    charted = days > 1 and kept
    if charted:
        await interaction.response.defer(ephemeral=True, thinking=True)
    rows = await client.usage.guild_usage(guild_id, days)
    report = UsageReport.of(rows)
    notes = [ARCHIVE_OFF] if days > 1 and not kept else []
    chart = None
    if charted and report.channels:
        last = client.usage.day
        names = channel_names(interaction)
        try:
            chart = await asyncio.to_thread(chart_of, rows, last - timedelta(days=days - 1), last, names)
        # A chart that cannot be drawn (a bug, or a Pillow without FreeType) must not take the figures with it.
        except Exception:
            log.exception("the /parley-admin usage chart could not be drawn")
            notes.append(CHART_FAILED)
    colour = server_colour(interaction.guild)
    embeds = usage_embeds(report, period, colour, as_of=client.usage.clock(), notes=notes)
    files: list[discord.File] = []
    if chart is not None:
        files.append(discord.File(io.BytesIO(chart), filename=CHART_FILE))
        # The chart shows inside the first embed: https://discord.com/developers/docs/reference#attachments
        embeds[0].set_image(url=f"attachment://{CHART_FILE}")
    await send_embeds(interaction, embeds, files=files)


def chart_of(rows: Sequence[TokenUsage], first: date, last: date, names: Mapping[int, str]) -> bytes:
    """The chart's PNG; CPU work for a thread."""
    return usage_chart_png(daily_usage(rows, first, last, names))


def channel_names(interaction: discord.Interaction) -> dict[int, str]:
    """The server's channels and threads by id, as the chart names them; one since deleted is left out."""
    guild = interaction.guild
    if guild is None:
        return {}
    return {channel.id: channel.name for channel in [*guild.channels, *guild.threads]}


def usage_embeds(
    report: UsageReport, period: str, colour: discord.Colour, *, as_of: datetime, notes: Sequence[str] = ()
) -> list[discord.Embed]:
    """The server's totals, then per channel and per member, biggest first, with what the costs are and lack;
    `notes` (what the reply lacks, and why) follow the totals."""
    words = PERIOD_WORDS[period]
    if not report.channels:
        description = "\n".join([f"Parley used no model tokens in this server {words}.", *notes])
        return [reply_embed(USAGE_TITLE, colour, description=description, timestamp=as_of)]
    head = reply_embed(
        USAGE_TITLE,
        colour,
        description="\n".join([f"**This server, {words}:** {describe_totals(report.total)}", *notes]),
        footer=f"Costs are estimates in US dollars from {PRICE_TABLE}'s price table.",
        timestamp=as_of,
    )
    fields = lines_fields("By channel", ranked_lines(report.channels, "#"))
    fields += lines_fields("By member", ranked_lines(report.members, "@"))
    if report.total.unpriced:
        fields.append(Field("Not in the costs", f"No price known for {', '.join(sorted(report.total.unpriced))}."))
    return paginate(head, fields)


def ranked_lines(shown: Mapping[int, Totals], mention: str) -> list[str]:
    """A line per channel or member, the biggest first, at most USAGE_MAX_ROWS and then how many more."""
    ranked = sorted(shown.items(), key=lambda item: (-item[1].tokens, item[0]))
    lines = [f"{_place_name(mention, key)} {describe_totals(totals)}" for key, totals in ranked[:USAGE_MAX_ROWS]]
    if len(ranked) > USAGE_MAX_ROWS:
        lines.append(f"… and {len(ranked) - USAGE_MAX_ROWS} more")
    return lines


def _place_name(mention: str, key: int) -> str:
    return "Conversation summaries" if mention == "@" and key == NO_MEMBER else f"<{mention}{key}>"
