"""Threads Parley opens on an @mention (`/parley-admin threads on`), their conversations, and where a message was
written."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping

import discord

from archive.holder import ArchiveHolder
from conversation import ConversationManager
from discord_io import is_closed_thread, thread_name
from records import CHANNEL, DIRECT, OWN_THREAD, MessageRecord
from upkeep.channel_settings import ChannelSettings
from upkeep.conversations import ConversationUpkeep

log = logging.getLogger("parley")


class Threads:
    """The channels where an @mention opens a thread, and the threads Parley opened, in which every message is for
    Parley while they are open."""

    def __init__(
        self,
        own_user: Callable[[], discord.ClientUser | None],
        get_guild: Callable[[int], discord.Guild | None],
        stores: ArchiveHolder,
        manager: ConversationManager,
        upkeep: ConversationUpkeep,
        within_rate: Callable[[discord.Message, Collection[int]], Awaitable[bool]],
        channels: ChannelSettings,
    ) -> None:
        # Parley's own user (known once logged in), and a server of this process's by id: discord.py's.
        self.own_user = own_user
        self.get_guild = get_guild
        self.stores = stores
        self.manager = manager
        self.upkeep = upkeep
        # Whether the member may be answered now: a member past their rate (or their role's tokens) gets no thread.
        self.within_rate = within_rate
        self.thread_channels = channels.thread_channels
        self.own_threads = channels.own_threads

    def kind_of(self, message: discord.Message) -> str:
        """Where the message was written, as the engine's conversation kind."""
        return self.kind_in(message.channel, in_server=message.guild is not None)

    def kind_in(self, channel: discord.abc.Messageable, *, in_server: bool) -> str:
        """The engine's conversation kind of a question asked in `channel` (by a message or a command)."""
        if not in_server:
            return DIRECT
        if getattr(channel, "id", None) in self.own_threads and not is_closed_thread(channel):
            return OWN_THREAD
        return CHANNEL

    async def opens_thread(self, message: discord.Message, record: MessageRecord, role_ids: Collection[int]) -> bool:
        """Whether the message @mentions Parley in a text channel where `/parley-admin threads on` was set (its
        author, holding `role_ids`, within their rate)."""
        user = self.own_user()
        assert user is not None
        return (
            message.channel.id in self.thread_channels
            and isinstance(message.channel, discord.TextChannel)
            and user.id in record.mention_ids
            and await self.within_rate(message, role_ids)
        )

    async def open_thread(self, message: discord.Message, record: MessageRecord) -> discord.Thread | None:
        """Open a thread on the message (Discord's "start thread from message"), named from its question.

        None if Discord refuses (no Create Public Threads permission, a thread already there): then the
        question is answered in the channel, as without `/parley-admin threads`.
        """
        user = self.own_user()
        assert user is not None and message.guild is not None
        name = thread_name(record.content, record.author, user.display_name)
        try:
            thread = await message.create_thread(name=name)
        except discord.HTTPException as error:
            log.warning(
                "could not open a thread on message %s in channel %s: %s", message.id, message.channel.id, error
            )
            return None
        self.own_threads[thread.id] = message.guild.id
        self.stores.archive.add_own_thread(thread.id, message.channel.id, message.guild.id)
        log.info("opened thread %s on message %s in channel %s", thread.id, message.id, message.channel.id)
        return thread

    async def set_threads(self, channel_id: int, guild_id: int, on: bool) -> None:
        """Make an @mention in the channel open a thread, or not, from its next message; the archive keeps it."""
        await self.stores.archive.set_thread_setting(channel_id, guild_id, on)
        if on:
            self.thread_channels.add(channel_id)
        else:
            self.thread_channels.discard(channel_id)

    def thread_updated(self, payload: discord.RawThreadUpdateEvent) -> None:
        """An archived or locked thread ends its conversation; Parley never reopens it."""
        # A THREAD_UPDATE always carries the thread's metadata; discord.py types it as such.
        metadata: Mapping[str, object] = payload.data["thread_metadata"]
        if metadata.get("archived") or metadata.get("locked"):
            self._end_thread_conversation(payload.thread_id)

    def _end_thread_conversation(self, thread_id: int) -> None:
        ended = self.manager.end(thread_id)
        if ended is not None:
            log.info("the conversation in thread %s ended: the thread was archived or locked", thread_id)
            # Like a timeout, a closed thread is a natural end: a reopened thread starts from its summary.
            self.upkeep.summarise_ended(ended)

    def end_closed_threads(self) -> None:
        """End the kept conversations of Parley's threads archived, locked or deleted while it was away.

        Discord sends only active threads with a server, so a thread missing from an available server is closed.
        """
        for conversation in self.manager.lasting():
            guild = self.get_guild(self.own_threads.get(conversation.channel_id, 0))
            if guild is None or guild.unavailable:
                continue
            thread = guild.get_thread(conversation.channel_id)
            if thread is None or is_closed_thread(thread):
                self._end_thread_conversation(conversation.channel_id)
