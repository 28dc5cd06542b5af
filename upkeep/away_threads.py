"""Threads archived while Parley was away: catch-up reads them like channels.

A new gateway session lists a server's active threads only (`guild.threads`), so a thread archived during the
outage would keep the gap in its archive; each readable channel's archived threads are listed, newest archived
first, down to the point the previous session's coverage reached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

import discord

from backfill import may_read

log = logging.getLogger("parley.backfill")


async def threads_archived_since(guilds: Iterable[discord.Guild], since: datetime) -> list[discord.Thread]:
    """The readable public threads of readable text and forum channels archived at or after `since`."""
    found: list[discord.Thread] = []
    for guild in guilds:
        parents: list[discord.TextChannel | discord.ForumChannel] = [*guild.text_channels, *guild.forums]
        for parent in parents:
            if may_read(parent):
                found += await _archived_in(parent, since)
    return found


async def _archived_in(parent: discord.TextChannel | discord.ForumChannel, since: datetime) -> list[discord.Thread]:
    found: list[discord.Thread] = []
    try:
        # Newest archived first: https://discord.com/developers/docs/resources/channel#list-public-archived-threads
        async for thread in parent.archived_threads(limit=None):
            if thread.archive_timestamp < since:
                break
            if may_read(thread):
                found.append(thread)
    except discord.HTTPException as error:
        # Permissions can change under us; the other channels' threads are still caught up.
        log.warning("could not list the archived threads of channel %s: %s", parent.id, error)
    return found
