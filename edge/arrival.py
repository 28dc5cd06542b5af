"""A question as Parley resolves it once, where it arrives: what it is, where it was asked, and who may see what.

Most arrive as messages; a command (/ask) brings its question here too, with the outlet its answer goes to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import discord

from admission.access import Asker, Place
from deciding.decider import addresses_bot
from discord_io import guild_id_of
from edge.asking import Question
from edge.streaming import Outlet
from records import MessageRecord

# Ordinary chat messages; joins, pins, boosts and the like are system messages nobody addresses.
CHAT_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


class Askers(Protocol):
    """Who is asking, with their roles in the server (admission/access_gate.py's `AccessGate.asker`)."""

    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker: ...


@dataclass(frozen=True)
class Arrival:
    """One member's (or bot's) message, or a command's question, resolved at the edge; what follows reads it from
    here, not from Discord.

    `question`: who asked what, where, and whether they may read the channel's history (edge/asking.py); `kind` is
    the engine's conversation kind (CHANNEL, OWN_THREAD, DIRECT); `guild_id` is 0 in direct messages; `addressed`:
    it @mentions Parley or replies to it; `place` and `asker`: where and by whom, as the access lists see it
    (admission/access.py), the asker with the roles Discord says they hold; `outlet`: where a command's answer goes
    (None: a reply to the message).
    """

    question: Question
    kind: str
    guild_id: int
    automated: bool
    addressed: bool
    place: Place
    asker: Asker
    outlet: Outlet | None = None

    @classmethod
    async def resolve(
        cls, message: discord.Message, record: MessageRecord, *, kind: str, bot_user_id: int, askers: Askers
    ) -> Arrival:
        """The message, its author's roles asked of `askers` (a webhook is no member: it holds none)."""
        guild_id = guild_id_of(message)
        author = message.author
        asker = Asker(author.id) if message.webhook_id is not None else await askers.asker(guild_id, author)
        return cls(
            Question.of_message(message, record),
            kind,
            guild_id,
            record.is_bot,  # `discord_io.is_automated`, as the record read it
            addresses_bot(record, bot_user_id),
            access_place(message.channel),
            asker,
        )

    @classmethod
    def asked(cls, question: Question, outlet: Outlet, *, kind: str, asker: Asker) -> Arrival:
        """A question a member (`asker`, with their roles) asked by command (/ask), addressed to Parley, answered
        through `outlet`."""
        return cls(question, kind, question.guild_id, False, True, access_place(question.channel), asker, outlet)

    @property
    def record(self) -> MessageRecord:
        return self.question.record

    @property
    def message(self) -> discord.Message | None:
        return self.question.message

    @property
    def reads_history(self) -> bool:
        return self.question.reads_history

    def moved_to(self, thread: discord.Thread, kind: str) -> Arrival:
        """The same question, as the start of the thread opened on it."""
        question = replace(self.question, record=replace(self.record, channel_id=thread.id))
        return replace(self, question=question, kind=kind)


def access_place(channel: discord.abc.Messageable | discord.abc.Snowflake) -> Place:
    """Where a message was written (or a command used), as the access lists see it: a thread is its parent
    channel's, in its category; a DM has no category."""
    if isinstance(channel, discord.Thread):
        return Place(channel.parent_id, channel.category_id)
    channel_id: int = getattr(channel, "id", 0)  # every channel, thread and DM has one
    return Place(channel_id, getattr(channel, "category_id", None))
