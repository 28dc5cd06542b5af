"""Forgetting: `/parley-admin forget`, and Discord's edits and deletions honoured in the archive and the conversations.

Discord's developer terms require honouring edits and deletions in the archive, and what the model is sent next
must be the channel as it now stands, so the live conversation follows too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

import discord
from pydantic_ai.messages import ModelMessage

from admission.optout import OptOuts
from archive import ArchiveWriteFailed
from archive.holder import ArchiveHolder
from archive.text import safe_text
from conversation import ConversationManager, utc_now
from deciding.journal import DecisionJournal
from discord_io import attachment_info
from profiles.channels import Profiles
from upkeep.channel_settings import ChannelSettings
from upkeep.conversations import ConversationUpkeep


class MessageFollower(Protocol):
    """Something else that keeps what messages say (edge/pins.py: pinned messages in the knowledge base), told of
    their edits and deletions as the archive is."""

    def message_edited(self, channel_id: int, message_id: int) -> None: ...
    def messages_gone(self, channel_id: int, message_ids: Collection[int]) -> None: ...
    def channel_gone(self, channel_id: int, guild_id: int) -> None: ...


class Forgetting:
    """What Parley forgets, and when: on `/parley-admin forget`, and as messages, channels and servers go."""

    def __init__(
        self,
        manager: ConversationManager,
        stores: ArchiveHolder,
        upkeep: ConversationUpkeep,
        decisions: DecisionJournal,
        profiles: Profiles,
        channels: ChannelSettings,
        optouts: OptOuts,
    ) -> None:
        self.manager = manager
        self.stores = stores
        self.upkeep = upkeep
        self.decisions = decisions
        self.profiles = profiles
        self.forget_markers = channels.forget_markers
        self.thread_channels = channels.thread_channels
        self.own_threads = channels.own_threads
        # An edit of a message withheld (its author opted out, or erased it) reaches neither a conversation nor the
        # archive.
        self.optouts = optouts
        # Told of edits and deletions after the conversations and the archive; each returns at once.
        self.followers: list[MessageFollower] = []

    async def forget(self, channel_id: int, guild_id: int) -> bool:
        """End the channel's conversation and start its next one afresh; whether there was one.

        The forget marker keeps context loading from reaching back past this moment; the archive,
        when on, keeps it across restarts.

        Raises:
            ArchiveWriteFailed: the archive dropped the marker; nothing was forgotten.
        """
        marker = discord.utils.time_snowflake(utc_now(), high=True)
        previous = self.forget_markers.get(channel_id)
        # Set before it is stored: the announcement of this very change (Postgres) then finds nothing new.
        self.forget_markers[channel_id] = marker
        try:
            await self.stores.archive.set_forget_marker(channel_id, guild_id, marker)
        except ArchiveWriteFailed:
            if previous is None:
                del self.forget_markers[channel_id]
            else:
                self.forget_markers[channel_id] = previous
            raise
        # The summaries of earlier conversations are what the next one would start from.
        self.stores.archive.delete_summaries(channel_id)
        self.upkeep.drop_ending(channel_id)
        live = self.manager.get(channel_id) is not None
        self.manager.end(channel_id)
        return live

    def forgotten(self, channel_id: int) -> None:
        """Another process's /parley-admin forget: the channel's conversation here ends unsummarised, as in `forget`."""
        self.upkeep.drop_ending(channel_id)
        self.manager.end(channel_id)

    def restore_conversation(self, channel_id: int, messages: list[ModelMessage]) -> None:
        """Make `messages` the model history of the channel's conversation, starting one if none is live."""
        conversation = self.manager.get(channel_id) or self.manager.start(channel_id)
        conversation.llm_history = messages
        self.manager.changed(channel_id)

    def _forget_channel(self, channel_id: int) -> None:
        self.own_threads.pop(channel_id, None)
        self.thread_channels.discard(channel_id)
        self.upkeep.drop_ending(channel_id)
        self.decisions.drop_channel(channel_id)
        self.profiles.forget(channel_id)
        self.forget_markers.pop(channel_id, None)

    def message_edited(self, payload: discord.RawMessageUpdateEvent) -> None:
        # discord.py types the update as a whole message; an embed resolving sends one without content.
        data: Mapping[str, object] = payload.data
        if "content" not in data:
            return
        # A withheld message's new text is kept nowhere; the files an edit took off it still go.
        withheld = self.optouts.withheld(payload.guild_id or 0, payload.message.author.id, payload.message_id)
        text = None if withheld else safe_text(payload.message.clean_content)
        # An update that lists the message's files lists all it still has: those missing were taken off it.
        # https://discord.com/developers/docs/topics/gateway-events#message-update
        files = tuple(attachment_info(a) for a in payload.message.attachments) if "attachments" in data else None
        for holder in self._holders(payload.channel_id, payload.message_id):
            conversation = self.manager.get(holder)
            if conversation is None:
                continue
            edited = text is not None and conversation.edit(payload.message_id, text)
            if (files is not None and conversation.keep_files(payload.message_id, files)) or edited:
                self.manager.changed(holder)
        if text is not None:
            self.stores.archive.edit(payload.message_id, text, payload.message.edited_at or utc_now())
        if files is not None:
            self.stores.archive.keep_attachments(payload.message_id, [file.attachment_id for file in files])
        for follower in self.followers:
            follower.message_edited(payload.channel_id, payload.message_id)

    def _holders(self, channel_id: int, message_id: int) -> tuple[int, ...]:
        """The conversations a message may be in: its channel's, and the thread Parley opened on it, if any
        (a thread started from a message has that message's id, and its question is that message)."""
        return (channel_id, message_id) if message_id in self.own_threads else (channel_id,)

    def message_deleted(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.forget_messages(payload.channel_id, [payload.message_id])

    def messages_deleted(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        self.forget_messages(payload.channel_id, payload.message_ids)

    def forget_messages(self, channel_id: int, message_ids: Collection[int]) -> None:
        self.decisions.forget_messages(channel_id, message_ids)
        conversation = self.manager.get(channel_id)
        if conversation is not None:
            changed = [conversation.delete(message_id) for message_id in message_ids]
            if any(changed):
                self.manager.changed(channel_id)
        for message_id in message_ids:
            opened = self.manager.get(message_id) if message_id in self.own_threads else None
            if opened is not None and opened.delete(message_id):
                self.manager.changed(message_id)
        self.upkeep.delete_from_ending(channel_id, message_ids)
        self.stores.archive.delete(message_ids)
        for follower in self.followers:
            follower.messages_gone(channel_id, message_ids)

    def channel_deleted(self, channel: discord.abc.GuildChannel) -> None:
        self.manager.end(channel.id)
        self._forget_channel(channel.id)
        self.stores.archive.delete_channel(channel.id)
        for follower in self.followers:
            follower.channel_gone(channel.id, channel.guild.id)

    def thread_deleted(self, payload: discord.RawThreadDeleteEvent) -> None:
        self.manager.end(payload.thread_id)
        self._forget_channel(payload.thread_id)
        self.stores.archive.delete_channel(payload.thread_id)
        for follower in self.followers:
            follower.channel_gone(payload.thread_id, payload.guild_id)

    def guild_removed(self, guild: discord.Guild) -> None:
        threads = [thread_id for thread_id, guild_id in self.own_threads.items() if guild_id == guild.id]
        for channel in [*guild.channels, *guild.threads]:
            self.manager.end(channel.id)
            self._forget_channel(channel.id)
        for thread_id in threads:
            self.manager.end(thread_id)
            self._forget_channel(thread_id)
        self.profiles.forget(guild.id)
        self.stores.archive.delete_guild(guild.id)
