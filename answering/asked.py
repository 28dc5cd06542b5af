"""Questions asked by command (/ask): admitted as a mention is, then answered on the message path, in public or
privately.

A command is acknowledged first (Discord waits 3 seconds for that, and the access lists may fetch members or read
the database), then everything a mention's answer would be refused for is checked and told to the asker in one line
only they see: direct messages off, the access lists, an opt-out, the server's budget, their role's tokens, their
rate. Each refusal is logged for `/parley why` as a message's would be. Only a public question where its asker (or
Parley) may not post is refused before the acknowledgement, from the interaction's own permissions: a public
"thinking…" would already be a post in the channel.

A public question then takes a mention's way (`MessagePipeline.handle`): it joins or starts the channel's
conversation, attributed to its asker, and its answer is the command's response, a message of the channel. A
private one is answered from what a mention's answer would see, and nothing of it is kept: not the question, not
the answer, no conversation started (`MessagePipeline.answer_aside`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Protocol

import discord

from admission.access import NOT_ALLOWED, AccessVerdict, Asker, Place
from admission.spending import Refused
from archive.text import safe_text
from deciding.journal import DecisionJournal
from discord_io import may_post
from edge.arrival import Arrival, access_place
from edge.asking import InteractionReply, Question
from edge.threads import Threads
from records import AskedAbout, Decision, MessageRecord

log = logging.getLogger("parley")

DIRECT_MESSAGES_OFF = "Parley doesn't answer in direct messages here; ask in a server channel."
# A command's response is posted whatever the channel's permissions: a public one is refused where its asker, or
# Parley itself, may not post, or a member denied Send Messages would post (and steer what is said) through Parley.
MAY_NOT_POST = "You can't post in this channel, so Parley won't answer you here in public; ask privately instead."
PARLEY_MAY_NOT_POST = "Parley may not post in this channel; ask privately instead."
# What the asker of a command is told when their question went unanswered, by the decision logged for it.
NOT_ANSWERED = {
    "queue_full": "Too many questions are waiting in this channel; ask again in a moment.",
    "superseded": "You asked again before I answered this, so I answered your newer question.",
    "server_budget": "This server has used up Parley's token budget for today; ask again after it resets.",
}
NOT_ANSWERED_OTHERWISE = "I couldn't answer that here just now; please try again."
ASK_FAILED = "Sorry, Parley could not take that question; the details are in its log."
# What `/parley why` shows of a private question: that it was asked, not what.
PRIVATE_EXCERPT = "(asked privately with /ask)"
PRIVATE_EXCERPT_ABOUT = "(asked privately about a message with Ask Parley)"
ASKED_PRIVATELY = Decision(True, "asked_privately", "command")


class QuestionPath(Protocol):
    """The way an admitted question is answered (answering/pipeline.py's `MessagePipeline`)."""

    @property
    def bot_user_id(self) -> int: ...

    async def asked(self, arrival: Arrival) -> None: ...

    async def answer_aside(self, arrival: Arrival, logged: MessageRecord) -> None: ...

    def decided_here(self, record: MessageRecord, decision: Decision) -> None: ...


class CommandAdmission(Protocol):
    """The one admission path, as a command asks it (admission/gatekeeper.py)."""

    async def command_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> Refused | None: ...

    async def give_back(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> None: ...


class CommandAccess(Protocol):
    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker: ...

    async def verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict: ...


class CommandQuestions:
    """Admits a question asked by command and has the message pipeline answer it."""

    def __init__(
        self,
        pipeline: QuestionPath,
        admission: CommandAdmission,
        access: CommandAccess,
        threads: Threads,
        journal: DecisionJournal,
        *,
        direct_messages: bool,
    ) -> None:
        self.pipeline = pipeline
        self.admission = admission
        self.access = access
        self.threads = threads
        self.journal = journal
        self.direct_messages = direct_messages

    def record(self, interaction: discord.Interaction, text: str) -> MessageRecord:
        """The question as the conversation records it: the asker's words, addressed to Parley as a mention is,
        with the command's id (a snowflake of the moment it was asked)."""
        bot_user_id = self.pipeline.bot_user_id
        return MessageRecord(
            message_id=interaction.id,
            channel_id=_channel_id(interaction),
            author_id=interaction.user.id,
            author=safe_text(interaction.user.display_name),
            content=safe_text(text),
            timestamp=interaction.created_at,
            mention_ids=frozenset({bot_user_id}),
        )

    async def ask(
        self,
        interaction: discord.Interaction,
        record: MessageRecord,
        *,
        private: bool,
        about: Callable[[Question], Awaitable[AskedAbout]] | None = None,
    ) -> None:
        """Acknowledge the command, admit the asker, and answer `record` (built by `record`, perhaps with more) in
        the channel or, `private`, to the asker alone; any refusal or failure is one line only they see. `about` reads
        the message the question is about ("Ask Parley"), once the command is acknowledged: it may take a while.
        """
        outlet = InteractionReply(interaction, ephemeral=private)
        if not private and (silenced := _public_refusal(interaction)) is not None:
            await outlet.tell(silenced)
            return
        await outlet.defer()
        question = _question(interaction, record)
        logged = _veiled(record, PRIVATE_EXCERPT if about is None else PRIVATE_EXCERPT_ABOUT) if private else record
        try:
            asker = await self.access.asker(question.guild_id, question.asker)
            refused = await self._refusal(question, asker, logged)
        except Exception:
            log.exception("admitting the question of command %s failed", question.id)
            await outlet.tell(ASK_FAILED)
            return
        if refused is not None:
            await outlet.tell(refused)
            return
        try:
            await self._answer(question, asker, outlet, logged, private=private, about=about)
        except Exception:
            log.exception("answering the question of command %s failed", question.id)
            if not outlet.sent:
                # Nothing reached the asker: the answer they were admitted for is theirs again.
                await self.admission.give_back(question.guild_id, question.asker_id, asker.role_ids)
                if not outlet.expired:
                    await outlet.tell(ASK_FAILED)

    async def _answer(
        self,
        question: Question,
        asker: Asker,
        outlet: InteractionReply,
        logged: MessageRecord,
        *,
        private: bool,
        about: Callable[[Question], Awaitable[AskedAbout]] | None,
    ) -> None:
        """Answer an admitted question (read what it is about first, if anything), or say in one line why not."""
        if about is not None:
            question = replace(question, about=await about(question))
        kind = self.threads.kind_in(question.channel, in_server=question.guild is not None)
        arrival = Arrival.asked(question, outlet, kind=kind, asker=asker)
        if private:
            await self.pipeline.answer_aside(arrival, logged)
        else:
            await self.pipeline.asked(arrival)
        if outlet.sent or outlet.expired:
            return  # answered, or no one can be told any more (the pipeline gave the answer back)
        await outlet.tell(await self._not_answered(question, asker))

    async def _refusal(self, question: Question, asker: Asker, logged: MessageRecord) -> str | None:
        """Why the asker may not be answered now, logged for `/parley why`; None admits them (spending an answer)."""
        guild_id = question.guild_id
        if question.guild is None and not self.direct_messages:
            return DIRECT_MESSAGES_OFF
        found = await self.access.verdict(guild_id, access_place(question.channel), asker)
        if not found.allowed:
            self.pipeline.decided_here(logged, NOT_ALLOWED)
            return found.refusal
        refused = await self.admission.command_refusal(guild_id, question.asker_id, asker.role_ids)
        if refused is None:
            return None
        self.pipeline.decided_here(logged, refused.decision)
        return refused.line

    async def _not_answered(self, question: Question, asker: Asker) -> str:
        """The line for a question that got no answer, by the decision logged for it. Turned down before any model
        call (a full or superseded line, the budget spent meanwhile), the answer it took is given back; the
        decider's "no" gave it back already, and an answer Discord lost was paid for."""
        record = question.record
        entries = self.journal.recent(record.channel_id)
        reason = next((entry.reason for entry in entries if entry.message_id == record.message_id), "")
        if reason not in NOT_ANSWERED:
            return NOT_ANSWERED_OTHERWISE
        await self.admission.give_back(question.guild_id, question.asker_id, asker.role_ids)
        return NOT_ANSWERED[reason]


def _question(interaction: discord.Interaction, record: MessageRecord) -> Question:
    """Who asked, where: a member may read the channel's history, manage its messages, or post in it, if their
    permissions there say so (a DM is their own)."""
    channel = interaction.channel
    assert isinstance(channel, discord.abc.Messageable)  # a command is used in a channel, thread or DM
    guild, permissions = interaction.guild, interaction.permissions
    reads_history = guild is None or permissions.read_message_history
    manages_messages = guild is not None and permissions.manage_messages
    posts = guild is None or may_post(permissions, in_thread=isinstance(channel, discord.Thread))
    return Question(
        record, interaction.user, channel, guild, reads_history, manages_messages=manages_messages, may_post=posts
    )


def _public_refusal(interaction: discord.Interaction) -> str | None:
    """Why a public answer may not be posted where the command was used: its asker, or Parley, may not post (or
    Parley may not see) there. A DM is the asker's own."""
    if interaction.guild_id is None:
        return None
    in_thread = isinstance(interaction.channel, discord.Thread)
    return posting_refusal(interaction.permissions, interaction.app_permissions, in_thread=in_thread)


def posting_refusal(member: discord.Permissions, app: discord.Permissions, *, in_thread: bool) -> str | None:
    """Why a public answer may not be posted in a server channel (`in_thread`: a thread) where the asker has
    `member` permissions and Parley `app`; None if it may."""
    if not may_post(member, in_thread=in_thread):
        return MAY_NOT_POST
    if not may_post(app, in_thread=in_thread):
        return PARLEY_MAY_NOT_POST
    return None


def _channel_id(interaction: discord.Interaction) -> int:
    assert interaction.channel_id is not None  # a command is used in a channel, thread or DM
    return interaction.channel_id


def _veiled(record: MessageRecord, excerpt: str) -> MessageRecord:
    """A private question as the decision log keeps it: `/parley why` shows the channel that it was asked (`excerpt`:
    how), not what."""
    return replace(record, content=excerpt)
