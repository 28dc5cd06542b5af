"""A message as Parley resolves it once, where it arrives: what it is, where it was written, and who may see what."""

from __future__ import annotations

from dataclasses import dataclass, replace

import discord

from admission.access import Asker, Place
from decider import addresses_bot
from discord_io import guild_id_of, is_automated, may_read_history, role_ids_of
from records import MessageRecord

# Ordinary chat messages; joins, pins, boosts and the like are system messages nobody addresses.
CHAT_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


@dataclass(frozen=True)
class Arrival:
    """One member's (or bot's) message, resolved at the edge; what follows reads it from here, not from Discord.

    `kind` is the engine's conversation kind (CHANNEL, OWN_THREAD, DIRECT); `guild_id` is 0 in direct messages;
    `addressed`: it @mentions Parley or replies to it; `reads_history`: its author may read the channel's history
    (Read Message History; a direct message's history is the author's own); `place` and `asker`: where and by whom,
    as the access lists see it (admission/access.py).
    """

    message: discord.Message
    record: MessageRecord
    kind: str
    guild_id: int
    automated: bool
    addressed: bool
    reads_history: bool
    place: Place
    asker: Asker

    @classmethod
    def resolve(cls, message: discord.Message, record: MessageRecord, *, kind: str, bot_user_id: int) -> Arrival:
        return cls(
            message,
            record,
            kind,
            guild_id_of(message),
            is_automated(message),
            addresses_bot(record, bot_user_id),
            message.guild is None or may_read_history(message),
            access_place(message.channel),
            access_asker(message.author),
        )

    def moved_to(self, thread: discord.Thread, kind: str) -> Arrival:
        """The same question, as the start of the thread opened on it."""
        return replace(self, record=replace(self.record, channel_id=thread.id), kind=kind)


def access_place(channel: discord.abc.Snowflake) -> Place:
    """Where a message was written (or a command used), as the access lists see it: a thread is its parent
    channel's, in its category; a DM has no category."""
    if isinstance(channel, discord.Thread):
        return Place(channel.parent_id, channel.category_id)
    return Place(channel.id, getattr(channel, "category_id", None))


def access_asker(author: discord.User | discord.Member) -> Asker:
    """Who wrote a message, as the access lists see them: a member's roles (@everyone's id is the server's); none
    for a user outside a server (a DM, a webhook)."""
    return Asker(author.id, role_ids_of(author))
