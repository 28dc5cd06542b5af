"""`/parley-admin digest on | off | show`: a daily or weekly catch-up of the channel, posted in it at a set hour.

Setting one takes Manage Channels, as the channel's mode does. The digest is kept in the archive (so without one
there is none) and written by the catch-up's model; the posting is upkeep/digests.py's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed, Digest, Digests
from archive.null import archive_off
from commands.tree import Refusal, place_of, send_ephemeral
from config import Settings
from discord_io import discord_time, may_post
from upkeep.digests import DAILY, EVERY, WEEKDAYS, WEEKLY, DigestAgents, latest_due, next_due, period_of, schedule_text

Every = Literal["daily", "weekly"]
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NO_ARCHIVE = "Digests are kept in the archive, which is off here (DATABASE_URL is empty)."
NO_MODEL = "Digests need a model Parley can run itself; this deploy's LLM_MODEL names none."
NOT_SAVED = "The digest could not be saved, so it is unchanged; the details are in Parley's log."
NO_DIGEST = "<#{channel}> has no digest: `/parley-admin digest on` sets one."
MAY_NOT_POST = "You can't post in this channel, so Parley won't post a digest here for you."


class DigestTimer(Protocol):
    """The digests' task, as the commands see it (upkeep/digests.py's DigestScheduler)."""

    def clock(self) -> datetime: ...
    def wake(self) -> None: ...


class DigestsOperated(Protocol):
    """The client, as `/parley-admin digest` sees it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def archive(self) -> Digests: ...
    @property
    def agents(self) -> DigestAgents: ...
    @property
    def digests(self) -> DigestTimer: ...


def _client(interaction: discord.Interaction) -> tuple[DigestsOperated, Digests]:
    client: Any = interaction.client
    operated = cast(DigestsOperated, client)
    if archive_off(operated.archive):
        raise Refusal(NO_ARCHIVE)
    return operated, operated.archive


class DigestCommands(
    app_commands.Group, name="digest", description="A daily or weekly catch-up of this channel, posted here."
):
    """`/parley-admin digest on | off | show`, about the channel they are used in."""

    @app_commands.command(description="Post a catch-up of this channel here every day or week (Manage Channels).")
    @app_commands.describe(
        every="daily (the default) or weekly",
        hour="The hour it is posted at, 0 to 23, in Parley's TIMEZONE (default 9)",
        weekday="For a weekly digest: the day it is posted on (default Monday)",
    )
    @app_commands.checks.has_permissions(manage_channels=True)
    async def on(
        self,
        interaction: discord.Interaction,
        every: Every = "daily",
        hour: app_commands.Range[int, 0, 23] = 9,
        weekday: Weekday = "monday",
    ) -> None:
        # Discord offers only the choices and the range, but a request can still say otherwise.
        if every not in EVERY or weekday not in WEEKDAYS or not 0 <= hour <= 23:
            raise Refusal("Choose every daily or weekly, an hour from 0 to 23, and a weekday from Monday to Sunday.")
        if isinstance(interaction.channel, discord.Thread):
            raise Refusal("A digest is posted in a channel, not a thread: use /parley-admin digest in the channel.")
        if not may_post(interaction.permissions, in_thread=False):
            raise Refusal(MAY_NOT_POST)
        client, archive = _client(interaction)
        if client.agents.catchup is None:
            raise Refusal(NO_MODEL)
        guild_id, channel_id = place_of(interaction)
        now, zone = client.digests.clock(), client.settings.zone
        digest = Digest(
            channel_id, guild_id, every, hour, WEEKDAYS.index(weekday) if every == WEEKLY else 0, 0, "",
            interaction.user.id, period_of(now),
        )  # fmt: skip
        # The period under way counts as posted: the first digest is the next one due, never one already past.
        digest = digest._replace(last_period=period_of(latest_due(digest, now, zone)))
        try:
            await archive.set_digest(digest)
        except ArchiveWriteFailed:
            raise Refusal(NOT_SAVED) from None
        client.digests.wake()
        await send_ephemeral(interaction, describe_digest_set(digest, client.settings, now))

    @app_commands.command(description="Stop this channel's digest (Manage Channels).")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def off(self, interaction: discord.Interaction) -> None:
        client, archive = _client(interaction)
        _, channel_id = place_of(interaction)
        if await archive.digest(channel_id) is None:
            await send_ephemeral(interaction, NO_DIGEST.format(channel=channel_id))
            return
        try:
            await archive.clear_digest(channel_id)
        except ArchiveWriteFailed:
            raise Refusal(NOT_SAVED) from None
        client.digests.wake()
        await send_ephemeral(interaction, f"<#{channel_id}> has no digest from now on.")

    @app_commands.command(description="Whether this channel has a digest, when, and when it is next due.")
    async def show(self, interaction: discord.Interaction) -> None:
        client, archive = _client(interaction)
        _, channel_id = place_of(interaction)
        digest = await archive.digest(channel_id)
        if digest is None:
            await send_ephemeral(interaction, NO_DIGEST.format(channel=channel_id))
            return
        await send_ephemeral(interaction, describe_digest_shown(digest, client.settings, client.digests.clock()))


def describe_digest_set(digest: Digest, settings: Settings, now: datetime) -> str:
    """What `/parley-admin digest on` says once the digest is kept."""
    period = "day" if digest.every == DAILY else "week"
    first = next_due(digest, now, settings.zone)
    return (
        f"<#{digest.channel_id}> gets a digest {schedule_text(digest, settings.zone)}, the first {discord_time(first)}:"
        f" what was said here in the {period} before, by topic with links, pinging no one; none when nothing was said."
    )


def describe_digest_shown(digest: Digest, settings: Settings, now: datetime) -> str:
    """What `/parley-admin digest show` says of a channel's digest."""
    due = discord_time(next_due(digest, now, settings.zone))
    lines = [f"<#{digest.channel_id}> gets a digest {schedule_text(digest, settings.zone)}; the next is due {due}."]
    if digest.claimant:
        posted = datetime.fromtimestamp(digest.last_period / 1000, UTC)
        lines.append(f"The latest was due {discord_time(posted)}.")
    lines.append(f"Set by <@{digest.set_by}> {discord_time(datetime.fromtimestamp(digest.set_at / 1000, UTC))}.")
    return "\n".join(lines)
