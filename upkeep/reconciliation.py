"""Reconciliation: after Parley was away, every archived message is checked against Discord again.

Catch-up (upkeep/backfill.py) rereads only each channel's newest archived messages, so a message deleted or edited
while Parley was away further back stays in the archive as it was, searchable until the retention drops it.
After each new gateway session's catch-up, this walks each channel's archived range from the session's start
back to the retention horizon, one channel and one history page of 100 at a time with a pause between pages:
archived messages Discord no longer returns are forgotten as a deletion seen live would be, and edited ones take
their new text. Nothing is added (what the archive lacks may have been left out on purpose: `/parley forget`).
How far each channel got is kept in the archive, so a restart goes on where the walk stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import discord

from archive import Archive, ReconciliationProgress
from archive.text import safe_text
from config import Settings
from conversation import utc_now
from upkeep.backfill import MESSAGES_PER_STEP, Forget, HistoryChannel
from upkeep.background import BackgroundTasks

log = logging.getLogger("parley.reconciliation")

# Discord's largest history page. https://discord.com/developers/docs/resources/message#get-channel-messages
PAGE = 100


def next_pass(stored: ReconciliationProgress | None, channel: HistoryChannel, upto_id: int) -> ReconciliationProgress:
    """Where a channel's walk starts after a session that began at `upto_id`: a new pass from there if the last one
    was done (or there was none); else the unfinished pass goes on, and a pass from `upto_id` follows it."""
    if stored is None or stored.done:
        return ReconciliationProgress(channel.id, channel.guild.id, upto_id=upto_id, reached_id=upto_id)
    if stored.upto_id >= upto_id:
        return stored
    return replace(stored, again_id=max(upto_id, stored.again_id or 0))


def horizon_id(retention_days: int, now: datetime) -> int:
    """The oldest message id the archive keeps: older ones are pruned anyway, so the walk stops there."""
    if not retention_days:
        return 0
    return discord.utils.time_snowflake(now - timedelta(days=retention_days), high=False)


@dataclass(frozen=True, slots=True)
class PageCheck:
    """What checking one history page did; `next_id`: where the next page starts, 0 at the channel's oldest."""

    next_id: int
    forgotten: int = 0
    edited: int = 0


async def recheck_page(
    channel: HistoryChannel, archive: Archive, *, before_id: int, horizon: int, forget: Forget
) -> PageCheck:
    """Check the channel's archived messages from the next history page below `before_id` against Discord: forget
    those it no longer returns, take in edits.

    A page holds at most PAGE messages, built a few at a time between turns of the event loop.
    """
    oldest_archived = await archive.newest_message_ids(channel.id, 1, before_id=before_id)
    if not oldest_archived or oldest_archived[0] <= horizon:
        return PageCheck(0)  # nothing archived further back: no need to ask Discord
    page: dict[int, discord.Message] = {}
    history = channel.history(
        limit=PAGE, before=discord.Object(id=before_id), after=discord.Object(id=horizon), oldest_first=False
    )
    async for message in history:
        page[message.id] = message
        if len(page) % MESSAGES_PER_STEP == 0:
            await asyncio.sleep(0)  # let the gateway's events and answers in between
    full = len(page) == PAGE
    # A full page covers the range from its oldest message up; a short one reaches down to the horizon.
    low = min(page) if full else horizon + 1
    # Beyond the page's messages, the archive holds in this range only ones Discord deleted.
    archived = await archive.message_ids_between(channel.id, low - 1, before_id - 1)
    gone = archived - page.keys()
    if gone:
        forget(channel.id, gone)
    edited = {i: page[i] for i in archived & page.keys() if page[i].edited_at is not None}
    # The range holds no more than the `archived` ones (fewer once the forgetting is written).
    changed = await _take_edits(archive, channel.id, edited, len(archived), after_id=low - 1, before_id=before_id)
    return PageCheck(low if full else 0, len(gone), changed)


async def _take_edits(
    archive: Archive, channel_id: int, edited: dict[int, discord.Message], most: int, *, after_id: int, before_id: int
) -> int:
    """Give the archived copies of `edited` messages, among the `most` archived between the ids, their new text
    when it changed after they were archived; how many did."""
    if not edited:
        return 0
    changed = 0
    for row in await archive.recent(channel_id, limit=most, before_id=before_id, after_id=after_id):
        message = edited.get(row.message_id)
        if message is None or message.edited_at is None:
            continue
        text = safe_text(message.clean_content)
        if text != row.content and (row.edited_at is None or message.edited_at > row.edited_at):
            archive.edit(row.message_id, text, message.edited_at)
            changed += 1
    return changed


@dataclass(slots=True)
class _Shown:
    """What `/parley status` says of one channel's walk in this session."""

    guild_id: int
    reached: datetime | None = None
    done: bool = False


class Reconciliation:
    """The walk over every channel's archived range, one channel at a time, in the background."""

    def __init__(self, settings: Settings, background: BackgroundTasks, forget: Forget) -> None:
        self.settings = settings
        self.background = background
        self.forget = forget
        self._task: asyncio.Task[None] | None = None
        self._shown: dict[int, _Shown] = {}
        self._walking: int | None = None
        self.forgotten = self.edited = 0

    def start(self, archive: Archive, channels: Sequence[HistoryChannel], session_start: datetime) -> None:
        """Walk `channels` (those catch-up just read) back over what they had before `session_start`."""
        self._shown = {channel.id: _Shown(channel.guild.id) for channel in channels}
        self.forgotten = self.edited = 0
        self._task = self.background.start(self.run(archive, channels, session_start), "reconciliation")

    async def stop(self) -> None:
        """Stop a walk still running (a new gateway session starts another); its progress is in the archive."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def finished(self) -> bool:
        """Whether this session's walk has ended (done, or stopped by a failure)."""
        return self._task is not None and self._task.done()

    async def run(self, archive: Archive, channels: Sequence[HistoryChannel], session_start: datetime) -> None:
        """Walk each channel in turn; one that Discord refuses is left (its progress kept) and the next one walked."""
        upto = discord.utils.time_snowflake(session_start, high=False)
        try:
            stored = await archive.reconciliation_progress()
            for channel in channels:
                progress = next_pass(stored.get(channel.id), channel, upto)
                try:
                    await self._walk(channel, archive, progress)
                except discord.HTTPException as error:
                    # Permissions can change under us, a channel can go: the others are still walked.
                    log.warning("recheck of channel %s against Discord stopped: %s", channel.id, error)
        except Exception:
            # A background task's failure would otherwise go unseen; the live archive carries on without it.
            log.exception("reconciliation failed")
            return
        finally:
            self._walking = None
        log.info(
            "reconciliation done: %d of %d channel(s) rechecked against Discord, %d deleted message(s) removed,"
            " %d edit(s) taken in",
            self.done_count(),
            len(self._shown),
            self.forgotten,
            self.edited,
        )

    async def _walk(self, channel: HistoryChannel, archive: Archive, progress: ReconciliationProgress) -> None:
        """Recheck one channel page by page, noting in the archive how far it got after each page."""
        self._walking = channel.id
        await archive.save_reconciliation_progress(progress)
        horizon = horizon_id(self.settings.history_retention_days, utc_now())
        while not progress.done:
            if progress.reached_id == 0 and progress.again_id is not None:
                # Parley was away again during the pass: what changed meanwhile may be anywhere below that.
                again = progress.again_id
                progress = replace(progress, upto_id=again, reached_id=again, again_id=None)
            checked = await recheck_page(
                channel, archive, before_id=progress.reached_id, horizon=horizon, forget=self.forget
            )
            self.forgotten += checked.forgotten
            self.edited += checked.edited
            progress = replace(progress, reached_id=checked.next_id)
            await archive.save_reconciliation_progress(progress)
            if checked.next_id:
                self._shown[channel.id].reached = discord.utils.snowflake_time(checked.next_id)
                # A page a second keeps the walk's requests few beside answers': discord.py's limiter alone
                # would let it take every request Discord's bucket allows.
                await asyncio.sleep(self.settings.reconcile_page_pause_seconds)
        self._shown[channel.id].done = True

    def done_count(self, guild_id: int | None = None) -> int:
        return sum(s.done for s in self._shown.values() if guild_id is None or s.guild_id == guild_id)

    def describe(self, guild_id: int) -> str | None:
        """A line for `/parley status` on this session's walk in a server (None if there is none): channels done
        of all, and how far back the channel walked now has got."""
        shown = [s for s in self._shown.values() if s.guild_id == guild_id]
        if not shown:
            return None
        done = self.done_count(guild_id)
        line = f"Recheck of the archive against Discord: {done}/{len(shown)} channels done"
        walking = self._shown.get(self._walking) if self._walking is not None else None
        if walking is not None and walking.guild_id == guild_id and walking.reached is not None:
            # A mention: Discord shows the channel's name only to those who may see the channel.
            return f"{line}; <#{self._walking}> rechecked back to {walking.reached:%Y-%m-%d %H:%M} UTC"
        if done < len(shown) and not self.running:
            return f"{line} (stopped; it goes on after the next restart)"
        return line
