"""A conversation's life beyond its messages: kept across restarts, ended on time, summarised, compacted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import discord
from pydantic import ValidationError

from archive import Archive, StoredConversation
from archive.holder import ArchiveHolder
from config import Settings
from conversation import ChannelConversation, ConversationManager
from ops.shared import channels_served_elsewhere
from prompting.context import (
    EARLIER_SUMMARIES,
    HistoryCompactor,
    Summarizer,
    pick_summaries,
    quoted_message_ids,
    render_earlier_conversations,
)
from upkeep.background import BackgroundTasks
from upkeep.conversation_snapshots import restore, snapshot

log = logging.getLogger("parley")

# Longest a timed-out conversation stays in memory and in the archive before it is ended.
SWEEP_SECONDS = 30.0


class SummaryAdmission(Protocol):
    """Admission, as summaries ask it: a summary's place in line, and whether the server's budget admits it."""

    def summary_call(self, guild_id: int, channel_id: int) -> AbstractAsyncContextManager[bool]: ...


class ConversationUpkeep:
    """Keeps the manager's conversations in the archive, resumes them, and summarises or compacts them."""

    def __init__(
        self,
        settings: Settings,
        manager: ConversationManager,
        stores: ArchiveHolder,
        background: BackgroundTasks,
        *,
        summarizer: Summarizer | None,
        forget_markers: dict[int, int],
        admission: SummaryAdmission,
        guild_of: Callable[[int], int],
    ) -> None:
        self.settings = settings
        self.manager = manager
        self.stores = stores
        self.background = background
        self.summarizer = summarizer
        self.forget_markers = forget_markers
        self.compactor = None if summarizer is None else HistoryCompactor(summarizer, settings.history_token_budget)
        # Every summary's model call is admitted (admission.Gatekeeper.summary_call), against the channel's server.
        self.admission = admission
        self.guild_of = guild_of
        # The channels whose history a compaction is waiting to summarise, or summarising.
        self._compacting: set[int] = set()
        # Ended conversations whose summary is being written: deletions still reach them, and a channel deleted
        # meanwhile takes them out, so no summary is kept from what is gone.
        self._ending: list[ChannelConversation] = []

    def drop_ending(self, channel_id: int) -> None:
        """No summary is kept of the channel's conversations that are ending now (forgotten, or the channel gone)."""
        self._ending = [ending for ending in self._ending if ending.channel_id != channel_id]

    def delete_from_ending(self, channel_id: int, message_ids: Collection[int]) -> None:
        """Deleted messages leave the channel's ending conversations too, so their summary cannot quote them."""
        for ending in self._ending:
            if ending.channel_id == channel_id:
                for message_id in message_ids:
                    ending.delete(message_id)

    async def resume(self, archive: Archive) -> None:
        """Take up the conversations a previous run left live; those that timed out since have ended.

        With SHARD_IDS, those of servers on other shards are other processes' to take up.
        """
        stored = await archive.stored_conversations()
        if self.settings.shard_ids and self.settings.shard_count:
            elsewhere = await channels_served_elsewhere(archive, self.settings.shard_ids, self.settings.shard_count)
            stored = {channel_id: kept for channel_id, kept in stored.items() if channel_id not in elsewhere}
        resumed = 0
        for channel_id, kept in sorted(stored.items(), key=lambda item: item[1].last_activity):
            try:
                conversation = restore(kept.state)
            except ValidationError as error:
                log.warning("dropping the kept conversation of channel %s: unreadable (%s)", channel_id, error)
                archive.drop_conversation(channel_id)
                continue
            if self.manager.adopt(conversation):
                resumed += 1
            else:
                self.ended(conversation, True)
        if stored:
            log.info("resumed %d of %d kept conversation(s)", resumed, len(stored))

    def keep(self, conversation: ChannelConversation) -> None:
        """The manager's listener: the archive writes the conversation's state with its next batch."""
        self.stores.archive.save_conversation(conversation.channel_id, lambda: _stored(conversation))

    def ended(self, conversation: ChannelConversation, expired: bool) -> None:
        """The manager's listener: a conversation that ended is no longer kept; one that timed out is summarised."""
        self.stores.archive.drop_conversation(conversation.channel_id)
        if expired:
            self.summarise_ended(conversation)

    def summarise_ended(self, conversation: ChannelConversation) -> None:
        """Keep a summary of an ended conversation for the channel's next one, in the background."""
        if self.summarizer is not None and conversation.llm_history:
            self.background.start(
                self._keep_summary(self.summarizer, conversation), f"summary-{conversation.channel_id}"
            )

    async def _keep_summary(self, summarizer: Summarizer, conversation: ChannelConversation) -> None:
        channel_id = conversation.channel_id
        deletions = len(conversation.redactions)
        self._ending.append(conversation)
        try:
            async with self.admission.summary_call(self.guild_of(channel_id), channel_id) as admitted:
                if not admitted:
                    return
                summary = await summarizer.summarize(conversation.llm_history, channel_id)
        except Exception as error:  # noqa: BLE001 - a model call: the next conversation starts without it
            log.warning("could not summarise the conversation that ended in channel %s: %r", channel_id, error)
            return
        finally:
            still_kept = any(ending is conversation for ending in self._ending)
            self._ending = [ending for ending in self._ending if ending is not conversation]
        if not still_kept or len(conversation.redactions) != deletions:
            log.info("summary of the conversation that ended in channel %s dropped: its messages changed", channel_id)
            return
        written_from = quoted_message_ids(conversation.llm_history) or (0, 0)
        self.stores.archive.add_summary(channel_id, summary, conversation.last_activity, written_from)
        log.info("kept the summary of the conversation that ended in channel %s", channel_id)

    async def end_timed_out(self) -> None:
        """End conversations as they time out, not only when their server next speaks: their kept state goes from
        the archive, and their summary is ready for the channel's next conversation."""
        interval = min(SWEEP_SECONDS, self.settings.conversation_timeout_seconds / 2)
        while True:
            await asyncio.sleep(interval)
            self.manager.evict_expired()

    def compact_later(self, conversation: ChannelConversation) -> None:
        """Summarise the conversation's oldest turns in the background once its history nears the budget."""
        channel_id = conversation.channel_id
        # One at a time per channel: a compaction waiting for the channel's turn is not under way for `due` yet.
        if self.compactor is not None and channel_id not in self._compacting and self.compactor.due(conversation):
            self._compacting.add(channel_id)
            self.background.start(self._compact(self.compactor, conversation), f"compact-{channel_id}")

    async def _compact(self, compactor: HistoryCompactor, conversation: ChannelConversation) -> None:
        channel_id = conversation.channel_id
        try:
            async with self.admission.summary_call(self.guild_of(channel_id), channel_id) as admitted:
                if admitted and await compactor.compact(conversation) and self.manager.get(channel_id) is conversation:
                    self.manager.changed(channel_id)
        finally:
            self._compacting.discard(channel_id)

    async def earlier_conversations(self, channel_id: int) -> str:
        """The channel's latest conversation summaries since its last forget, quoted; empty without any."""
        budget = self.settings.summary_context_tokens
        if self.summarizer is None or budget == 0:
            return ""
        summaries = await self.stores.archive.summaries(channel_id, EARLIER_SUMMARIES)
        marker = self.forget_markers.get(channel_id)
        if marker is not None:
            forgotten_at = discord.utils.snowflake_time(marker)
            summaries = [summary for summary in summaries if summary.ended_at > forgotten_at]
        picked = pick_summaries(summaries, budget)
        return render_earlier_conversations(picked) if picked else ""


def _stored(conversation: ChannelConversation) -> StoredConversation:
    return StoredConversation(conversation.last_activity, snapshot(conversation))
