"""Questions from the gap: the messages catch-up finds that Parley missed while it was away (a restart, a gateway
session Discord invalidated or would not resume), taken up as if they had just arrived.

Each caught-up channel's missed messages are taken up oldest first, beside the bot. A message its channel's live
conversation does not hold yet enters it, in order; a recent one (GAP_ANSWER_MINUTES) that could be answered
(it addresses Parley, or its channel has a conversation) goes the way a live message goes (`MessagePipeline.arrived`:
its claim, the bot gate, admission, the decider, the answer), so a message the gateway delivered too, or another
process sharing the archive took up, is not decided again (answering/once.py). An older one that addresses Parley is
logged (`gap_too_old`, claimed the same way) and left: an answer that late would be an answer to a conversation that
has moved on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import timedelta
from typing import Protocol

import discord

from admission.access_gate import MemberRoles, RolesUnknown
from admission.optout import OptOuts
from answering.once import Claimed, MessageClaims
from config import Settings
from conversation import ConversationManager, utc_now
from deciding.decider import addresses_bot
from discord_io import may_read_history, replied_author_id, to_record
from edge.arrival import CHAT_MESSAGE_TYPES, Arrival, Askers
from edge.threads import Threads
from records import CHANNEL, Decision, MessageRecord
from upkeep.background import BackgroundTasks

log = logging.getLogger("parley.gap")

# A missed message that Parley would have been asked to answer live, found too late to answer now.
GAP_TOO_OLD = Decision(False, "gap_too_old", "gap")


class MessagePath(Protocol):
    """The way a live message goes (answering/pipeline.py's `MessagePipeline`), which a missed one takes too."""

    @property
    def bot_user_id(self) -> int: ...

    @property
    def claims(self) -> MessageClaims: ...

    async def arrived(self, arrival: Arrival) -> None: ...

    def in_support(self, channel: object) -> bool: ...

    def decided_here(self, record: MessageRecord, decision: Decision) -> None: ...


class GapAdmission(Protocol):
    """What the gap's messages wait for and are kept out by (admission/gatekeeper.py)."""

    @property
    def optouts(self) -> OptOuts: ...

    def channel_turn(
        self, channel_id: int, *, let_go_for_approval: bool = True
    ) -> AbstractAsyncContextManager[None]: ...


class GapAccess(Askers, Protocol):
    """Who asks, with their roles, and whose member data (admission/access_gate.py)."""

    @property
    def members(self) -> MemberRoles: ...


class GapQuestions:
    """Collects what catch-up finds missed, per channel, and takes each channel's up once it is caught up."""

    def __init__(
        self,
        settings: Settings,
        manager: ConversationManager,
        background: BackgroundTasks,
        pipeline: MessagePath,
        *,
        admission: GapAdmission,
        threads: Threads,
        access: GapAccess,
    ) -> None:
        self.window = timedelta(minutes=settings.gap_answer_minutes)
        # The names besides its own that Parley answers to, as a live message's record is made with them.
        self.wake_words = settings.wake_words
        # A conversation keeps no more messages than this, so no more of a channel's gap are worth holding.
        self.kept_per_channel = settings.max_conversation_messages
        self.manager = manager
        self.background = background
        self.pipeline = pipeline
        self.admission = admission
        self.threads = threads
        self.access = access
        self._found: dict[int, list[discord.Message]] = {}
        # Per channel, the take-up under way: a later catch-up's messages wait for it, so they stay in order.
        self._taking_up: dict[int, asyncio.Task[None]] = {}

    def found(self, message: discord.Message) -> None:
        """Catch-up archived a message the archive lacked (a channel's newest first): kept if it may matter.

        It matters if it is recent (it may be answered, or be context of an answer), if its channel has a live
        conversation (which should hear it), if it @mentions or replies to Parley (logged when too old: a call by
        name is not looked for here, where every message of a long outage passes), or if it is Parley's (an answer
        sent just before a crash, whose question is then not asked again).
        """
        channel_id = message.channel.id
        kept = self._found.setdefault(channel_id, [])
        if len(kept) < self.kept_per_channel and self._matters(message):
            kept.append(message)

    def _matters(self, message: discord.Message) -> bool:
        if message.type not in CHAT_MESSAGE_TYPES or message.guild is None:
            return False
        bot_id = self.pipeline.bot_user_id
        return (
            message.created_at >= utc_now() - self.window
            or self.manager.get(message.channel.id) is not None
            or message.author.id == bot_id
            or bot_id in {user.id for user in message.mentions}
            or replied_author_id(message) == bot_id
        )

    def caught_up(self, channel_id: int) -> None:
        """The channel is caught up (its gap is archived): take up what was found in it, beside the bot."""
        messages = self._found.pop(channel_id, [])
        if not messages:
            return
        earlier = self._taking_up.get(channel_id)
        task = self.background.start(self._take_up(messages, earlier), f"gap-{channel_id}")
        self._taking_up[channel_id] = task
        task.add_done_callback(lambda done: self._forget_task(channel_id, done))

    async def settled(self) -> None:
        """Until every take-up under way now has ended."""
        await asyncio.gather(*self._taking_up.values())

    def _forget_task(self, channel_id: int, task: asyncio.Task[None]) -> None:
        if self._taking_up.get(channel_id) is task:
            del self._taking_up[channel_id]

    async def _take_up(self, messages: list[discord.Message], earlier: asyncio.Task[None] | None) -> None:
        if earlier is not None:
            await asyncio.wait([earlier])
        bot_id = self.pipeline.bot_user_id
        answered = _answered_by(messages, bot_id)
        optouts = self.admission.optouts
        for message in sorted(messages, key=lambda message: message.id):
            if message.author.id == bot_id:
                continue  # Parley's own posts are its conversation's through the answers that made them
            if message.guild is not None and optouts.withheld(message.guild.id, message.author.id, message.id):
                continue  # opted out or erased since catch-up found it
            try:
                await self._take_up_one(message, answered)
            except Exception:
                # One message's failure (Discord, the archive, the model) must not leave the rest untaken.
                log.exception("could not take up message %s of channel %s", message.id, message.channel.id)

    async def _take_up_one(self, message: discord.Message, answered: set[int]) -> None:
        """Decide one missed message the way a live one is decided, or only let its conversation hear it."""
        channel_id = message.channel.id
        # A live message of this channel taking its turn now may be this one (delivered both ways): let it finish.
        async with self.admission.channel_turn(channel_id):
            pass
        record = to_record(message, self.wake_words)
        kind = self.threads.kind_of(message)
        addressed = addresses_bot(record, self.pipeline.bot_user_id)
        conversation = self.manager.get(channel_id)
        if conversation is not None and any(held.message_id == message.id for held in conversation.messages):
            return  # the gateway delivered it too: decided live already
        # A support place's messages all go the live way: its questions wait for the desk, and the others are what
        # the desk hears after them (a member's answer included).
        support = self.pipeline.in_support(message.channel)
        open_question = addressed or conversation is not None or kind != CHANNEL or support
        if not open_question or message.id in answered:
            self._hear(channel_id, conversation is not None, message)
            return
        if message.created_at < utc_now() - self.window:
            self._hear(channel_id, conversation is not None, message)
            claims = self.pipeline.claims
            if addressed and await claims.claim(message.id, channel_id=channel_id, answerable=True) is Claimed.FIRST:
                self.pipeline.decided_here(record, GAP_TOO_OLD)
            return
        # History carries the author without their roles: the access gate asks Discord for them, as for the
        # member's Read Message History below (one lookup, kept).
        arrival = await Arrival.resolve(
            message, record, kind=kind, bot_user_id=self.pipeline.bot_user_id, askers=self.access
        )
        question = replace(arrival.question, reads_history=await reads_history(message, self.access.members))
        await self.pipeline.arrived(replace(arrival, question=question))

    def _hear(self, channel_id: int, live: bool, message: discord.Message) -> None:
        """Let the channel's live conversation hear a message it will not decide (in order, by its id)."""
        if live:
            self.manager.record_message(channel_id, to_record(message, self.wake_words))


def _answered_by(messages: Iterable[discord.Message], bot_id: int) -> set[int]:
    """The messages Parley's own posts among `messages` reply to: answered before the archive could note it."""
    return {
        message.reference.message_id
        for message in messages
        if message.author.id == bot_id and message.reference is not None and message.reference.message_id is not None
    }


async def reads_history(message: discord.Message, members: MemberRoles) -> bool:
    """Whether the author of a message read back from Discord's history may read the channel's history.

    History carries the author without their member data, and Parley keeps no member cache (no members intent),
    so the member is asked of `members`; one who left, a webhook, or one Discord could not say of, may not.
    """
    if isinstance(message.author, discord.Member) or message.guild is None:
        return message.guild is None or may_read_history(message)
    try:
        member = await members.member_in(message.guild.id, message.author.id)
    except RolesUnknown:
        return False
    if member is None:
        return False
    try:
        return message.channel.permissions_for(member).read_message_history
    except discord.ClientException:
        return False
