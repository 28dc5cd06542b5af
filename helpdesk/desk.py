"""The support desk: in the channels an admin put in support mode, the questions nobody addressed, answered from the
server's documents when a member has not answered them first and the documents answer them with confidence.

A support channel is a text channel, where a candidate is a message that asks something (helpdesk/questions.py),
or a forum channel, where it is each new post (its first message, whose id is its thread's). Either way it
addresses nobody: no mention, no reply, no call by name; a message addressed to Parley takes the normal way, and so
does any message of a channel with a live conversation (the normal way wins).

A candidate waits SUPPORT_WAIT_SECONDS for a member's answer: a reply to it by someone else than its asker or, in a
forum post, any message by someone else. Answered so, it is left (`SUPPORT_HUMAN_FIRST`). Otherwise the documents
are consulted (`KnowledgeBase.consult`) and their confidence gated (`knowledge.confidence.answers`): above the
threshold, the message's way answers it (`SupportPath.answer_from_documents`: admission, budgets, the answer tail),
with the sections found and what was said after it in its request (`SUPPORT_ANSWERED`, its score the decision's
confidence); below, Parley stays out (`SUPPORT_NOT_SURE`), and a forum post still unanswered SUPPORT_HANDOFF_MINUTES
after it was made is handed to SUPPORT_STAFF_ROLE in one line (`SUPPORT_HANDED_OFF`, helpdesk/handoff.py).

Once: the message's way claims a candidate before it reaches the desk (answering/once.py), so of the processes
sharing an archive, and across a restart, only the one that claimed it waits on it, answers it or hands it off. A
process stopped during the wait leaves it unanswered rather than risk two answers; a question asked while Parley
was stopped comes back through catch-up (answering/gap.py) with the messages after it, and is judged the same way.

The time is read from `clock` (a test moves it and awaits `ticks.next_tick()`); the channels in support mode are read
from the archive when the desk starts and at each tick (at most a minute apart), so another process's change is seen.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import discord

from archive import SupportChannelTables, SupportHandoff
from archive.holder import ArchiveHolder
from config import Settings
from conversation import utc_now
from discord_io import may_post
from edge.arrival import Arrival
from edge.readable import shown_channel_ids
from helpdesk.handoff import hand_off
from helpdesk.question import (
    SUPPORT_ANSWERED,
    SUPPORT_HANDED_OFF,
    SUPPORT_HUMAN_FIRST,
    SUPPORT_NOT_A_QUESTION,
    SUPPORT_NOT_SURE,
    SupportAnswer,
)
from helpdesk.questions import asks_something
from knowledge.base import Consulted
from knowledge.confidence import answers, confidence
from prompting.quoting import format_knowledge
from records import Decision, FromDocuments, MessageRecord
from upkeep.ticks import Ticks

log = logging.getLogger("parley.helpdesk")

# The decisions' tier in `/parley why`.
SUPPORT_TIER = "support"
NOT_A_QUESTION = Decision(False, SUPPORT_NOT_A_QUESTION, SUPPORT_TIER)
HUMAN_FIRST = Decision(False, SUPPORT_HUMAN_FIRST, SUPPORT_TIER)
HANDED_OFF = Decision(False, SUPPORT_HANDED_OFF, SUPPORT_TIER)
# Its asker may no longer see the channel or post in it (a moderator's change during the wait): Parley posts nothing
# there for them (the where-Parley-may-post promise), and this is no support outcome the report counts.
ASKER_MAY_NOT_POST = Decision(False, "asker_may_not_post", SUPPORT_TIER)
# Sections a question is looked up in, and shown to the model when it is answered.
CONSULTED_SECTIONS = 5
# What was said after a question that its answer's request shows, at most (the newest are dropped past it).
LATER_MESSAGES = 20
# Members' answers remembered for questions not taken yet (a reply can overtake its question's way to the desk).
ANSWERS_REMEMBERED = 1000
# How long past its due time a hand-off no process of this archive finds its post for is kept before it is dropped.
HANDOFF_KEPT = timedelta(days=1)
# The messages of a post read back before it is handed off, newest first: a member's answer among them leaves it.
POST_MESSAGES_READ = 100
# The longest the desk sleeps: the support channels are read again at least this often.
MAX_WAIT_SECONDS = 60.0


class SupportPath(Protocol):
    """The message's way (answering/pipeline.py's `MessagePipeline`), as the desk notes its decisions and answers
    (`answer_from_documents` notes the decision to answer, `answered`, once admission lets it)."""

    def decided_here(self, record: MessageRecord, decision: Decision) -> None: ...

    def withheld(self, guild_id: int, record: MessageRecord) -> bool: ...

    async def answer_from_documents(
        self, arrival: Arrival, documents: FromDocuments, support: SupportAnswer
    ) -> None: ...


class Consulting(Protocol):
    """The knowledge base (knowledge/base.py), as the desk asks it whether the documents answer a question."""

    async def has_documents(self, guild_id: int) -> bool: ...

    async def consult(
        self, guild_id: int, query: str, *, limit: int = 5, channel_ids: Collection[int]
    ) -> Consulted: ...


class DeskStores(ArchiveHolder, Protocol):
    """The archive (the null archive without one), and the knowledge base kept in it (bot.py's OpenStores)."""

    @property
    def knowledge(self) -> Consulting | None: ...


@dataclass
class Waiting:
    """A candidate the desk waits on for a member's answer. `later`: what was said in its channel (its post) after
    it, by anyone."""

    arrival: Arrival
    forum: bool
    asked_at: datetime
    later: list[MessageRecord] = field(default_factory=list)

    @property
    def record(self) -> MessageRecord:
        return self.arrival.record


class SupportDesk:
    """The support channels, the candidates waiting in them, and the task that answers or hands them off when due."""

    def __init__(
        self,
        settings: Settings,
        stores: DeskStores,
        get_channel: Callable[[int], object | None],
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.wait = timedelta(seconds=settings.support_wait_seconds)
        self.handoff = timedelta(minutes=settings.support_handoff_minutes)
        self.threshold = settings.knowledge_answer_threshold
        self.staff_role = settings.support_staff_role
        self.stores = stores
        # A channel or thread of this process's servers, from discord.py's cache: a post to hand off.
        self.get_channel = get_channel
        self.clock = clock
        # This process, in the archive's hand-off claims: unique per run, like answering/once.py's.
        self.claimant = uuid.uuid4().hex
        # The message's way, which hands the desk its candidates and answers them: set by the composition root.
        self.path: SupportPath | None = None
        # The channels in support mode, with their servers' (the archive's, read at each tick).
        self.channels: dict[int, int] = {}
        self._waiting: dict[int, Waiting] = {}
        # The questions members answered, by their message id, with who answered: the newest ANSWERS_REMEMBERED.
        self._answered: dict[int, set[int]] = {}
        # Its task's ticks: a test moves `clock`, then awaits `ticks.next_tick()` instead of sleeping.
        self.ticks = Ticks("support desk", longest=MAX_WAIT_SECONDS)

    @property
    def _archive(self) -> SupportChannelTables:
        return self.stores.archive

    # -- Support mode --

    async def load(self) -> None:
        """Read the channels in support mode from the archive."""
        self.channels = await self._archive.support_channels()

    async def set_support(self, channel_id: int, guild_id: int, on: bool, *, set_by: int) -> None:
        """Put the channel in support mode or take it out; returns once the archive holds it.

        Raises:
            archive.ArchiveWriteFailed: nothing changed.
        """
        await self._archive.set_support(channel_id, guild_id, on, set_by=set_by, now=self.clock())
        if on:
            self.channels[channel_id] = guild_id
        else:
            self.channels.pop(channel_id, None)
            for message_id in [key for key, waiting in self._waiting.items() if _home(waiting) == channel_id]:
                del self._waiting[message_id]

    def in_support(self, channel: object) -> bool:
        """Whether messages written in `channel` are the desk's: a support text channel, or a post of a support
        forum."""
        return _support_home(channel) in self.channels

    # -- Messages --

    def candidate(self, arrival: Arrival) -> bool:
        """Whether the message is a question the desk may take: in a support place, by a member, addressing nobody,
        and asking something (a text channel's) or starting a post (a forum's)."""
        message = arrival.message
        if message is None or arrival.automated or arrival.addressed or not self.in_support(message.channel):
            return False
        record = arrival.record
        if record.mention_ids or record.reply_to_author_id is not None or record.called_by_name:
            return False
        if record.mentions_everyone or message.reference is not None or message.role_mentions:
            return False
        if _is_forum_post(message.channel):
            return message.id == message.channel.id
        return not isinstance(message.channel, discord.Thread) and asks_something(record.content)

    def heard(self, arrival: Arrival) -> None:
        """A message of a support place: a member's answer to a waiting question leaves it to them (decided at once);
        any other is what was said after the questions waiting there."""
        message = arrival.message
        if message is None or not self.in_support(message.channel):
            return
        self._note_answer(message, arrival.automated)
        answered = self._answered_by(message, arrival.automated)
        if answered is not None:
            self._left_to_a_member(answered)
        for waiting in self._waiting.values():
            same_place = waiting.record.channel_id == message.channel.id
            if same_place and waiting.record.message_id < message.id and len(waiting.later) < LATER_MESSAGES:
                waiting.later.append(arrival.record)

    def _note_answer(self, message: discord.Message, automated: bool) -> None:
        """Remember which question `message` may answer (a reply's, a post's), for one still on its way to the desk."""
        answers = _answers(message)
        if automated or answers is None or answers == message.id:
            return
        self._answered.setdefault(answers, set()).add(message.author.id)
        if len(self._answered) > ANSWERS_REMEMBERED:
            del self._answered[next(iter(self._answered))]

    def _answered_by(self, message: discord.Message, automated: bool) -> Waiting | None:
        """The waiting question `message` answers: a reply to it (a post's any message) by another member."""
        answers = _answers(message)
        waiting = None if automated or answers is None else self._waiting.get(answers)
        if waiting is None or waiting.record.author_id == message.author.id or waiting.record.message_id == message.id:
            return None
        return waiting

    def _left_to_a_member(self, waiting: Waiting) -> None:
        del self._waiting[waiting.record.message_id]
        self._decide(waiting.record, HUMAN_FIRST)
        log.info("support question %s was answered by a member", waiting.record.message_id)

    def take(self, arrival: Arrival, *, candidate: bool) -> None:
        """A message of a support place the normal way leaves (unaddressed, no conversation live): a candidate waits
        for its turn (`run`); any other is chat the desk stays out of."""
        record = arrival.record
        if not candidate:
            self._decide(record, NOT_A_QUESTION)
            return
        message = arrival.message
        assert message is not None  # a candidate is a message
        waiting = Waiting(arrival, _is_forum_post(message.channel), message.created_at)
        self._waiting[record.message_id] = waiting
        if self._answered.get(record.message_id, set()) - {record.author_id}:
            self._left_to_a_member(waiting)  # a member's answer overtook it
            return
        self.ticks.wake()

    # -- The task --

    async def run(self) -> None:
        """Tick, then sleep until the next question is due (at most a minute) or until woken; for ever."""
        await self.ticks.run(self._tick_and_sleep)

    async def _tick_and_sleep(self) -> float:
        await self._tick()
        return self._sleep()

    def _sleep(self) -> float:
        """Until the next question is due, at most a minute (the hand-offs, kept in the archive, are looked for at
        every tick)."""
        now = self.clock()
        due = [waiting.asked_at + self.wait for waiting in self._waiting.values()]
        soonest = min(((moment - now).total_seconds() for moment in due), default=MAX_WAIT_SECONDS)
        return min(max(soonest, 0.0), MAX_WAIT_SECONDS)

    async def _tick(self) -> None:
        await self.load()
        now = self.clock()
        due = [waiting for waiting in self._waiting.values() if waiting.asked_at + self.wait <= now]
        for waiting in due:
            if _home(waiting) not in self.channels:
                del self._waiting[waiting.record.message_id]  # support mode was turned off meanwhile
        settled = [self._settle(waiting) for waiting in due if waiting.record.message_id in self._waiting]
        for failure in await asyncio.gather(*settled, return_exceptions=True):
            if isinstance(failure, Exception):
                log.error("support desk: a question could not be settled", exc_info=failure)
        for handoff in await self._archive.due_handoffs(now):
            try:
                await self._hand_off(handoff, now)
            except Exception:
                log.exception("support desk: post %s could not be handed off", handoff.message_id)

    async def _settle(self, waiting: Waiting) -> None:
        """A question due: answered from the documents, or left (a forum post, for its hand-off). It leaves the
        waiting questions first, so a failure (Discord, the archive, the model) is logged once, not every tick."""
        record = waiting.record
        del self._waiting[record.message_id]
        assert self.path is not None  # set by the composition root before any message comes
        if self.path.withheld(waiting.arrival.guild_id, record):
            return  # its author opted out or erased it meanwhile: nothing of it stays
        message = waiting.arrival.message
        assert message is not None  # the desk takes messages
        if not await _asker_may_post(message):
            self._decide(record, ASKER_MAY_NOT_POST)
            return
        consulted = await self._consult(waiting.arrival)
        score = 0.0 if consulted is None else confidence(consulted.evidence)
        if consulted is None or not consulted.hits or not answers(consulted.evidence, self.threshold):
            self._decide(record, Decision(False, SUPPORT_NOT_SURE, SUPPORT_TIER, confidence=score))
            if waiting.forum:  # it waits, in the archive, for a member or the hand-off
                due = waiting.asked_at + self.handoff
                await self._archive.await_handoff(
                    SupportHandoff(record.message_id, waiting.arrival.guild_id, record.author_id, due)
                )
            return
        best = consulted.hits[0]
        arrival = waiting.arrival
        support = SupportAnswer(
            record.message_id, record.author_id, arrival.guild_id, record.channel_id, best.title, best.heading, score
        )
        documents = FromDocuments(format_knowledge(consulted.hits), tuple(waiting.later))
        await self.path.answer_from_documents(arrival, documents, support)

    async def _consult(self, arrival: Arrival) -> Consulted | None:
        """The documents' sections for the question, as its asker may read them and its channel shows them."""
        knowledge = self.stores.knowledge
        message = arrival.message
        if knowledge is None or message is None or not await knowledge.has_documents(arrival.guild_id):
            return None
        return await knowledge.consult(
            arrival.guild_id, _query(message), limit=CONSULTED_SECTIONS, channel_ids=_readable(message)
        )

    async def _hand_off(self, handoff: SupportHandoff, now: datetime) -> None:
        """Hand a forum post nobody answered to the staff role (without SUPPORT_STAFF_ROLE, only the decision), once:
        its thread is read back first, so a member's answer since (while Parley was away too) leaves it to them."""
        post = self.get_channel(handoff.message_id)
        if not isinstance(post, discord.Thread):
            if now - handoff.due_at > HANDOFF_KEPT:
                await self._archive.drop_handoff(handoff.message_id)  # its post is gone, or its server is
            return  # another process's server, or a thread not cached yet: looked for again at the next tick
        record = _post_record(post, handoff)
        assert self.path is not None
        if self.path.withheld(handoff.guild_id, record) or await _answered_in(post, handoff.asker_id):
            await self._archive.drop_handoff(handoff.message_id)
            if not self.path.withheld(handoff.guild_id, record):
                self._decide(record, HUMAN_FIRST)
            return
        if not await self._archive.claim_handoff(handoff.message_id, self.claimant):
            return  # another process (or an earlier run of this one) handed it off
        self._decide(record, HANDED_OFF)
        if self.staff_role is not None:
            await hand_off(post, self.staff_role, self.handoff)

    def _decide(self, record: MessageRecord, decision: Decision) -> None:
        assert self.path is not None
        self.path.decided_here(record, decision)


async def _answered_in(post: discord.Thread, asker_id: int) -> bool:
    """Whether a member other than the asker has written in the post (its newest POST_MESSAGES_READ messages).

    Raises:
        discord.HTTPException: Discord would not say; the hand-off waits for the next tick.
    """
    async for message in post.history(limit=POST_MESSAGES_READ):
        if not message.author.bot and message.author.id != asker_id:
            return True
    return False


def _post_record(post: discord.Thread, handoff: SupportHandoff) -> MessageRecord:
    """The post's question as its decisions quote it: its title (its first message may be read no more)."""
    owner = post.owner
    author = owner.display_name if owner is not None else ""
    return MessageRecord(handoff.message_id, post.id, handoff.asker_id, author, post.name, handoff.due_at)


def answered(support: SupportAnswer) -> Decision:
    """The decision to answer a question from the documents, with the gate's score as its confidence."""
    return Decision(True, SUPPORT_ANSWERED, SUPPORT_TIER, confidence=support.score)


def _support_home(channel: object) -> int:
    """The channel whose support mode covers `channel`: itself, or the forum a post is in."""
    if isinstance(channel, discord.Thread):
        return channel.parent_id if _is_forum_post(channel) else 0
    return getattr(channel, "id", 0)


def _home(waiting: Waiting) -> int:
    message = waiting.arrival.message
    return 0 if message is None else _support_home(message.channel)


async def _asker_may_post(message: discord.Message) -> bool:
    """Whether the question's author may still see its channel and post in it, as the channel's permissions stand now
    (a message read back from history carries its author without their member data: asked of Discord then)."""
    guild, author = message.guild, message.author
    if guild is None:
        return True
    member = author if isinstance(author, discord.Member) else guild.get_member(author.id)
    try:
        member = member or await guild.fetch_member(author.id)
        permissions = message.channel.permissions_for(member)
    except (discord.HTTPException, discord.ClientException):
        return False  # they left, or Discord could not say: nothing is posted for them
    return may_post(permissions, in_thread=isinstance(message.channel, discord.Thread))


def _answers(message: discord.Message) -> int | None:
    """The question `message` may answer: the message it replies to, or the post it is written in."""
    if _is_forum_post(message.channel):
        return message.channel.id
    reference = message.reference
    return None if reference is None else reference.message_id


def _is_forum_post(channel: object) -> bool:
    return isinstance(channel, discord.Thread) and isinstance(channel.parent, discord.ForumChannel)


def _query(message: discord.Message) -> str:
    """What the documents are searched with: the message, and a forum post's title before it."""
    if _is_forum_post(message.channel):
        return f"{getattr(message.channel, 'name', '')}\n{message.content}"
    return message.content


def _readable(message: discord.Message) -> frozenset[int]:
    """The channels whose documents (pinned messages) an answer in the message's channel may quote for its author."""
    author, guild = message.author, message.guild
    if guild is None or not isinstance(author, discord.Member):
        return frozenset()
    return shown_channel_ids(guild, author, message.channel)
