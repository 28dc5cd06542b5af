"""Threads archived while Parley was away: catch-up reads them like channels.

A new gateway session lists a server's active threads only (`guild.threads`), so a thread archived during the
outage would keep the gap in its archive; each readable channel's archived threads (public ones, and private ones
Parley was in) are listed down to the point the previous session's coverage reached.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from datetime import datetime

import discord

from upkeep.backfill import may_read

log = logging.getLogger("parley.backfill")


async def threads_archived_since(guilds: Iterable[discord.Guild], since: datetime) -> list[discord.Thread]:
    """The readable threads of readable text and forum channels archived at or after `since`: public ones, and the
    private ones Parley was a member of."""
    found: list[discord.Thread] = []
    for guild in guilds:
        for forum in filter(may_read, guild.forums):
            found += await _archived_in(forum.archived_threads(limit=None), forum.id, since, by_archiving=True)
        for channel in filter(may_read, guild.text_channels):
            found += await _archived_in(channel.archived_threads(limit=None), channel.id, since, by_archiving=True)
            # Newest opened first, so the whole list is read: a thread opened long ago may have been archived lately.
            joined = channel.archived_threads(private=True, joined=True, limit=None)
            found += await _archived_in(joined, channel.id, since, by_archiving=False)
    return found


async def _archived_in(
    threads: AsyncIterator[discord.Thread], parent_id: int, since: datetime, *, by_archiving: bool
) -> list[discord.Thread]:
    """The readable threads of a listing archived at or after `since`; `by_archiving`: the listing is newest archived
    first, so it ends at the first one archived before.
    https://discord.com/developers/docs/resources/channel#list-public-archived-threads"""
    found: list[discord.Thread] = []
    try:
        async for thread in threads:
            if thread.archive_timestamp < since:
                if by_archiving:
                    break
                continue
            if may_read(thread):
                found.append(thread)
    except discord.HTTPException as error:
        # Permissions can change under us; the other channels' threads are still caught up.
        log.warning("could not list the archived threads of channel %s: %s", parent_id, error)
    return found
