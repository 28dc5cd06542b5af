"""A message as Parley resolves it once, where it arrives: what it is, where it was written, and who may see what."""

from __future__ import annotations

from dataclasses import dataclass, replace

import discord

from decider import addresses_bot
from discord_io import guild_id_of, is_automated, may_read_history
from records import MessageRecord

# Ordinary chat messages; joins, pins, boosts and the like are system messages nobody addresses.
CHAT_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


@dataclass(frozen=True)
class Arrival:
    """One member's (or bot's) message, resolved at the edge; what follows reads it from here, not from Discord.

    `kind` is the engine's conversation kind (CHANNEL, OWN_THREAD, DIRECT); `guild_id` is 0 in direct messages;
    `addressed`: it @mentions Parley or replies to it; `reads_history`: its author may read the channel's history
    (Read Message History; a direct message's history is the author's own).
    """

    message: discord.Message
    record: MessageRecord
    kind: str
    guild_id: int
    automated: bool
    addressed: bool
    reads_history: bool

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
        )

    def moved_to(self, thread: discord.Thread, kind: str) -> Arrival:
        """The same question, as the start of the thread opened on it."""
        return replace(self, record=replace(self.record, channel_id=thread.id), kind=kind)
