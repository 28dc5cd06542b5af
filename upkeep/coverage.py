"""Since when the archive holds every message of a channel: watched live this gateway session, or caught up."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

import discord

from admission.optout import OptOuts
from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off
from config import Settings
from conversation import utc_now
from upkeep.away_threads import threads_archived_since
from upkeep.backfill import ChannelCatchUp, HistoryChannel, catch_up, readable_channels
from upkeep.background import BackgroundTasks
from upkeep.reconciliation import Reconciliation

log = logging.getLogger("parley")

# The archive's bot_state entry: per channel, since when the archive holds all of it.
COVERAGE_STATE = "archive_covered_since"


class MissedMessages(Protocol):
    """What becomes of the messages catch-up finds Parley missed (answering.gap.GapQuestions)."""

    def found(self, message: discord.Message) -> None:
        """A message catch-up archived that the archive lacked."""

    def caught_up(self, channel_id: int) -> None:
        """The channel's catch-up is over: every message it found has been told to `found`."""


class Coverage:
    """The archive's coverage of each channel, and the catch-up that extends it back over the time Parley was away."""

    def __init__(
        self,
        settings: Settings,
        background: BackgroundTasks,
        forget: Callable[[int, Collection[int]], None],
        optouts: OptOuts,
    ) -> None:
        self.settings = settings
        self.background = background
        # What catch-up found deleted while Parley was away: forgotten as a deletion seen live would be.
        self.forget = forget
        # Catch-up archives no message of a member who opted out, as the live archive does not.
        self.optouts = optouts
        # The archive holds every message only from the moment this gateway session started watching,
        # or, per channel, from whenever this session's catch-up filled the gap before it.
        self.watching_since = utc_now()
        self.covered_since: dict[int, datetime] = {}
        self._catch_up: asyncio.Task[None] | None = None
        # After catch-up, the walk that rechecks the whole archived range for deletions and edits made meanwhile.
        self.reconciliation = Reconciliation(settings, background, forget)
        # set_state reads its value back to confirm it; two notes at once would each read the other's.
        self._coverage_lock = asyncio.Lock()

    def restart(self) -> None:
        """A new gateway session (not a resume) may have missed messages: the archive's unbroken record of the
        channels starts again now, until catch-up fills the gap."""
        self.watching_since = utc_now()
        self.covered_since.clear()

    async def start_catch_up(self, archive: Archive, guilds: Sequence[discord.Guild], missed: MissedMessages) -> None:
        """Stop an earlier session's catch-up, and catch the archive up over the time Parley was away, telling
        `missed` what it finds Parley missed (so that questions from the gap are answered)."""
        await self._stop_catch_up()
        await self.reconciliation.stop()
        if archive_off(archive):  # nothing to catch up into
            return
        # What earlier sessions covered joins this one's only through a complete catch-up of the gap.
        earlier = await self._noted_coverage(archive)
        await self._note_coverage(archive)
        if self.settings.backfill_max_messages:
            self._catch_up = self.background.start(self.catch_up(archive, earlier, guilds, missed), "catch-up")

    async def catch_up(
        self,
        archive: Archive,
        earlier: Mapping[int, datetime],
        guilds: Sequence[discord.Guild],
        missed: MissedMessages,
    ) -> None:
        """Archive what the readable channels got while Parley was away, and drop what was deleted meanwhile; then
        recheck their whole archived range (upkeep/reconciliation.py).

        `earlier`: per channel, since when the archive held all of it up to the previous session's end; `missed` is
        told of the messages Parley missed.
        """
        try:
            channels = list(readable_channels(guilds))
            await self._catch_up_channels(archive, earlier, channels, missed)
            if earlier:
                # Threads archived since the previous session started watching may have holes too. Listing them
                # takes a request or two per channel, so the channels are caught up first.
                threads = await threads_archived_since(guilds, max(earlier.values()))
                await self._catch_up_channels(archive, earlier, threads, missed)
                channels += threads
        except Exception:
            # A background task's failure would otherwise go unseen; the live archive carries on without it.
            log.exception("catch-up failed")
            return
        self.reconciliation.start(archive, channels, self.watching_since)

    async def _catch_up_channels(
        self,
        archive: Archive,
        earlier: Mapping[int, datetime],
        channels: Sequence[HistoryChannel],
        missed: MissedMessages,
    ) -> None:
        """Catch `channels` up, noting in the archive each one's coverage as it is done."""
        settings = self.settings

        async def caught_up(result: ChannelCatchUp) -> None:
            covered = result.covered_since
            if result.complete and result.channel_id in earlier:
                # The gap reached back into the previous session, so its coverage carries on into this one.
                covered = min(covered, earlier[result.channel_id])
            self.covered_since[result.channel_id] = min(covered, self.watching_since)
            await self._note_coverage(archive)
            # After its coverage is noted: an answer's context then comes from the archive, gap included.
            missed.caught_up(result.channel_id)

        summary = await catch_up(
            channels,
            archive,
            limit=settings.backfill_max_messages,
            retention_days=settings.history_retention_days,
            concurrency=settings.backfill_concurrency,
            now=utc_now(),
            session_start=self.watching_since,
            forget=self.forget,
            on_channel=caught_up,
            withheld=self.optouts.withheld,
            missed=missed.found,
        )
        if channels:
            log.info("%s", summary.describe())

    async def _noted_coverage(self, archive: Archive) -> dict[int, datetime]:
        """Per channel, since when the archive held all of it, as the last session noted."""
        noted = await archive.get_state(self.coverage_state)
        try:
            return {int(channel): datetime.fromisoformat(since) for channel, since in json.loads(noted or "{}").items()}
        except (ValueError, TypeError, AttributeError):
            log.warning("ignoring an unreadable %s in the archive", self.coverage_state)
            return {}

    async def _note_coverage(self, archive: Archive) -> None:
        """Keep this session's coverage for the next one; channels not caught up (yet) are left out."""
        try:
            async with self._coverage_lock:
                noted = {str(channel): since.isoformat() for channel, since in self.covered_since.items()}
                await archive.set_state(self.coverage_state, json.dumps(noted, sort_keys=True))
        except ArchiveWriteFailed as error:
            log.warning("could not note the archive's coverage (%s): the next start reads context from Discord", error)

    @property
    def coverage_state(self) -> str:
        """Where the archive keeps this process's coverage: processes running other shards (SHARD_IDS) keep theirs
        apart, else each would overwrite the others' with its own channels."""
        if not self.settings.shard_ids:
            return COVERAGE_STATE
        return f"{COVERAGE_STATE}:{','.join(map(str, sorted(self.settings.shard_ids)))} of {self.settings.shard_count}"

    async def _stop_catch_up(self) -> None:
        task, self._catch_up = self._catch_up, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def catching_up(self) -> bool:
        """Whether this session's catch-up is still running."""
        return self._catch_up is not None and not self._catch_up.done()

    def watched_from(self, channel_id: int) -> datetime:
        """Since when the archive holds every message of the channel."""
        return self.covered_since.get(channel_id, self.watching_since)
