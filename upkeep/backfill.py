"""Catch-up: archive what the channels got while Parley was not connected.

The gateway does not replay what a new session missed (a crash, a redeploy, an outage), so on
every new session each readable channel's messages newer than its newest archived one are read
from Discord's message history and archived, and archived messages in that range that Discord no
longer returns (deleted while Parley was away) are removed. discord.py's limiter paces the
requests; a few channels are caught up at a time, in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import discord

from archive import Archive
from archive.text import safe_text
from discord_io import to_archived

log = logging.getLogger("parley.backfill")

# Beyond this many queued archive writes, catch-up waits for the writer: a long backlog would
# only grow the memory and the loss a crash costs.
MAX_PENDING_WRITES = 5_000

# The newest archived messages of a channel read again from Discord (one history page), so that
# edits and deletions of the last things said before Parley went away reach the archive too; older
# ones are not rechecked, which would cost a page per 100 messages of the whole archive.
RECHECKED_MESSAGES = 100

# Messages built and queued between two turns of the event loop: a page of 100 at once holds the
# loop for over 10 ms (discord.py builds a Message object for each).
MESSAGES_PER_STEP = 10

HistoryChannel = discord.TextChannel | discord.Thread
Forget = Callable[[int, Collection[int]], None]
# Told of each message catch-up archived that the archive did not have: one Parley missed (answering/gap.py).
Missed = Callable[[discord.Message], None]
# Whether a message (by server, author and id) may not be kept or heard (admission.optout's `withheld`): its author
# opted out, or erased what they wrote up to it.
Withheld = Callable[[int, int, int], bool]


@dataclass(frozen=True, slots=True)
class ChannelCatchUp:
    """What catching up one channel did, and since when the archive now holds all of the channel."""

    channel_id: int
    archived: int
    deleted: int
    capped: bool
    covered_since: datetime
    failed: bool = False

    @property
    def complete(self) -> bool:
        """Whether the whole gap since the channel's newest archived message was fetched."""
        return not (self.capped or self.failed)


@dataclass(frozen=True, slots=True)
class CatchUpSummary:
    channels: int
    archived: int
    deleted: int
    capped: int
    failed: int

    def describe(self) -> str:
        capped = f", {self.capped} capped at BACKFILL_MAX_MESSAGES" if self.capped else ""
        failed = f", {self.failed} unreadable" if self.failed else ""
        return (
            f"catch-up done: {self.archived} message(s) archived and {self.deleted} deleted one(s) removed"
            f" in {self.channels} channel(s){capped}{failed}"
        )


def readable_channels(guilds: Iterable[discord.Guild]) -> Iterator[HistoryChannel]:
    """The text channels and active threads whose history Parley may read."""
    for guild in guilds:
        channels: list[HistoryChannel] = [*guild.text_channels, *guild.threads]
        yield from filter(may_read, channels)


def may_read(channel: HistoryChannel | discord.ForumChannel) -> bool:
    """Whether Parley may read the channel's history."""
    permissions = channel.permissions_for(channel.guild.me)
    return permissions.view_channel and permissions.read_message_history


async def catch_up_channel(
    channel: HistoryChannel,
    archive: Archive,
    *,
    limit: int,
    retention_days: int,
    now: datetime,
    session_start: datetime,
    forget: Forget,
    withheld: Withheld = lambda guild_id, author_id, message_id: False,
    missed: Missed | None = None,
) -> ChannelCatchUp:
    """Archive the channel's messages newer than its newest archived one (at most `limit`, newest first,
    none older than the retention), but those `withheld`; refresh its last RECHECKED_MESSAGES
    archived ones, and `forget` archived ones in that range that Discord no longer has; `missed` hears of each
    message newly archived."""
    # Messages archived live in this session say nothing about where the gap before it starts.
    before_session = discord.utils.time_snowflake(session_start, high=False)
    rechecked = await archive.newest_message_ids(channel.id, RECHECKED_MESSAGES, before_id=before_session)
    newest = rechecked[0] if rechecked else 0
    # From the oldest rechecked message itself, so that one is checked for deletion too.
    floor = rechecked[-1] - 1 if rechecked else 0
    if retention_days:
        floor = max(floor, discord.utils.time_snowflake(now - timedelta(days=retention_days), high=False))
    limit += len(rechecked)
    fetched: list[int] = []
    # Newest first, so a gap longer than the cap keeps its latest messages, which context and search want most.
    already = set(rechecked)
    async for message in channel.history(limit=limit, after=discord.Object(id=floor), oldest_first=False):
        kept = not withheld(channel.guild.id, message.author.id, message.id)
        if kept and _archive_fetched(archive, message, already, before_session) and missed is not None:
            missed(message)
        fetched.append(message.id)
        if archive.pending_writes > MAX_PENDING_WRITES:
            await archive.flush()
        elif len(fetched) % MESSAGES_PER_STEP == 0:
            await asyncio.sleep(0)  # let the gateway's events and answers in between
    capped = len(fetched) >= limit
    low = min(fetched) - 1 if capped else floor
    high = max([*fetched, newest])
    gone = await archive.message_ids_between(channel.id, low, high) - set(fetched) if high > low else set()
    if gone:
        forget(channel.id, gone)
    return ChannelCatchUp(channel.id, len(fetched), len(gone), capped, discord.utils.snowflake_time(max(low, 0)))


def _archive_fetched(archive: Archive, message: discord.Message, already: set[int], before_session: int) -> bool:
    """Archive a message read back from Discord's history, without undoing what the gateway told better; whether
    the archive lacked it (Parley missed it).

    A message history returns carries its author without their server nickname, so a copy the archive
    already has (rechecked, or archived live in this session) only takes an edit's new text; a missed
    one is added whole, as soon as its page arrives, so a deletion event handled later still wins.
    """
    if message.id >= before_session:
        return False  # archived live by this session, from the gateway
    if message.id not in already:
        archive.add(to_archived(message))
        return True
    if message.edited_at is not None:
        archive.edit(message.id, safe_text(message.clean_content), message.edited_at)
    return False


async def catch_up(
    channels: Iterable[HistoryChannel],
    archive: Archive,
    *,
    limit: int,
    retention_days: int,
    concurrency: int,
    now: datetime,
    session_start: datetime,
    forget: Forget,
    on_channel: Callable[[ChannelCatchUp], Awaitable[None]] | None = None,
    withheld: Withheld = lambda guild_id, author_id, message_id: False,
    missed: Missed | None = None,
) -> CatchUpSummary:
    """Catch up every channel, `concurrency` at a time; `on_channel` hears of each one caught up or failed, `missed`
    of each message Parley missed."""
    waiting = deque(channels)
    done: list[ChannelCatchUp] = []
    failed = 0

    async def work() -> None:
        nonlocal failed
        while waiting:
            channel = waiting.popleft()
            try:
                result = await catch_up_channel(
                    channel,
                    archive,
                    limit=limit,
                    retention_days=retention_days,
                    now=now,
                    session_start=session_start,
                    forget=forget,
                    withheld=withheld,
                    missed=missed,
                )
            except discord.HTTPException as error:
                # Permissions can change under us; one unreadable channel must not stop the others.
                failed += 1
                log.warning("catch-up of channel %s failed: %s", channel.id, error)
                result = ChannelCatchUp(channel.id, 0, 0, capped=False, covered_since=now, failed=True)
            else:
                done.append(result)
            if on_channel is not None:
                await on_channel(result)

    await asyncio.gather(*(work() for _ in range(max(1, min(concurrency, len(waiting))))))
    return CatchUpSummary(
        channels=len(done),
        archived=sum(result.archived for result in done),
        deleted=sum(result.deleted for result in done),
        capped=sum(result.capped for result in done),
        failed=failed,
    )
