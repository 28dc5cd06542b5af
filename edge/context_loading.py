"""A new conversation's context: the channel's recent messages before its first, from the archive or from Discord;
and the messages around one a member asks about ("Ask Parley" on a message)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import discord

from archive import Archive
from archive.holder import ArchiveHolder
from archive.null import archive_off
from config import Settings
from discord_io import record_from_archive, to_record
from records import MessageRecord
from upkeep.coverage import Coverage

log = logging.getLogger("parley")


class ContextLoader:
    """Loads what a conversation starts from, since the channel's last forget and within CONTEXT_MAX_AGE_MINUTES."""

    def __init__(
        self, settings: Settings, stores: ArchiveHolder, coverage: Coverage, forget_markers: dict[int, int]
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.coverage = coverage
        self.forget_markers = forget_markers

    async def load_context(self, channel: discord.abc.Messageable, before_id: int) -> list[MessageRecord]:
        """The channel's recent messages before the snowflake `before_id` (a message's, or a command's: both say
        when they were made), oldest first, as a new conversation's context.

        From the archive when it holds the channel's whole period, watched live or caught up (no
        Discord round trip), otherwise from Discord's message history.
        """
        count = self.settings.context_message_count
        if count == 0:
            return []
        channel_id: int = getattr(channel, "id", 0)  # every channel, thread and DM has one
        before = discord.Object(id=before_id)
        since = before.created_at - timedelta(minutes=self.settings.context_max_age_minutes)
        after_id = self.forget_markers.get(channel_id, 0)
        if not archive_off(self.stores.archive) and since >= self.coverage.watched_from(channel_id):
            return await self._context_from_archive(self.stores.archive, channel_id, before, count, since, after_id)
        after_id = max(after_id, discord.utils.time_snowflake(since, high=False))
        return await self._context_from_discord(channel, before, count, discord.Object(id=after_id))

    async def _context_from_archive(
        self, archive: Archive, channel_id: int, before: discord.Object, count: int, since: datetime, after_id: int
    ) -> list[MessageRecord]:
        await archive.flush()  # the messages just before the trigger may still be queued
        hours = (before.created_at - since).total_seconds() / 3600
        earlier = await archive.recent(
            channel_id,
            limit=count,
            hours=hours,
            now=before.created_at,
            before_id=before.id,
            after_id=after_id,
        )
        return [record_from_archive(row) for row in earlier]

    async def _context_from_discord(
        self, channel: discord.abc.Messageable, before: discord.Object, count: int, after: discord.abc.Snowflake
    ) -> list[MessageRecord]:
        try:
            history = [
                to_record(earlier)
                # Newest first: with `after` alone discord.py pages forward from it, which in a busy
                # channel would be the period's first messages, not the ones just before `before`.
                async for earlier in channel.history(limit=count, before=before, after=after, oldest_first=False)
            ]
        except discord.HTTPException as error:
            log.warning("could not load context for channel %s: %s", getattr(channel, "id", "?"), error)
            return []
        history.sort(key=lambda record: record.message_id)
        return history

    async def load_around(self, message: discord.Message, before: int, after: int) -> list[MessageRecord]:
        """Up to `before` messages before `message` and `after` after it, oldest first, from Discord: what a member
        asking about it sees around it. Nothing from before the channel's last forget; none when Discord fails."""
        forgotten_through = self.forget_markers.get(message.channel.id, 0)
        try:
            earlier = [m async for m in message.channel.history(limit=before, before=message, oldest_first=False)]
            later = [m async for m in message.channel.history(limit=after, after=message, oldest_first=True)]
        except discord.HTTPException as error:
            log.warning("could not load the messages around message %s: %s", message.id, error)
            return []
        return sorted(
            (to_record(m) for m in [*earlier, *later] if m.id > forgotten_through), key=lambda r: r.message_id
        )
