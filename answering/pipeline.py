"""A message's way from its arrival to its answer: recorded, admitted, decided in its channel's turn, answered."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Protocol

import discord

from admission.access import NOT_ALLOWED, REGENERATE_NOT_ALLOWED, AccessVerdict, Asker, Place
from admission.access_gate import MemberRoles
from admission.declined import Declined, Notice
from admission.gatekeeper import SERVER_BUDGET
from admission.optout import OPTED_OUT, OptOuts, veil
from admission.spending import Refused
from answering.answer import Answering
from answering.asked import ASKED_PRIVATELY
from answering.decisions import DecisionLog
from answering.once import Claimed, MessageClaims
from conversation import ChannelConversation, ConversationManager
from deciding.decider import JudgeCall, ResponseDecider, log_decision
from discord_io import guild_id_of, is_closed_thread
from edge.arrival import Arrival, access_place
from edge.asking import InteractionReply, MessageReply
from edge.context_loading import ContextLoader
from edge.streaming import AnsweredTurn, Outlet
from edge.threads import Threads
from helpdesk.desk import SupportDesk, answered
from helpdesk.question import SupportAnswer
from records import CHANNEL, OWN_THREAD, Decision, FromDocuments, MessageRecord
from upkeep.conversations import ConversationUpkeep

log = logging.getLogger("parley")

# Decisions the admission limits make instead of the decider: the message is recorded, not answered.
SUPERSEDED = Decision(False, "superseded", "limit")
QUEUE_FULL = Decision(False, "queue_full", "limit")


class Gate(Protocol):
    """Which automated messages may make Parley answer."""

    def human_spoke(self, channel_id: int) -> None: ...

    def refusal(self, author_id: int, channel_id: int) -> Decision | None: ...


class MessageAdmission(Protocol):
    """Who may make Parley call a model, and when: as the message path asks it."""

    @property
    def bot_gate(self) -> Gate: ...

    @property
    def optouts(self) -> OptOuts: ...

    def answer_slot(self) -> AbstractAsyncContextManager[None]: ...

    def idle(self, channel_id: int) -> bool: ...

    def join_line(self, channel_id: int, record: MessageRecord) -> bool: ...

    def leave_line(self, channel_id: int, message_id: int) -> bool: ...

    def channel_turn(
        self, channel_id: int, *, let_go_for_approval: bool = True
    ) -> AbstractAsyncContextManager[None]: ...

    async def admit_member(
        self, guild_id: int, message: discord.Message, record: MessageRecord, addressed: bool, role_ids: Collection[int]
    ) -> Declined | None: ...

    async def judged(self, guild_id: int, call: JudgeCall) -> Decision | Declined: ...

    async def regenerate_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> str | None: ...

    async def command_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> Refused | None: ...

    async def give_back(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> None: ...

    async def server_budget_spent(self, guild_id: int) -> bool: ...

    def decline_over_budget(
        self, guild_id: int, message: discord.Message, where: discord.Thread | None = None
    ) -> Declined: ...


class Access(Protocol):
    """Who may use Parley where (admission/access_gate.py): who asks with their roles, a message's verdict, and the
    notice its author is told once."""

    @property
    def members(self) -> MemberRoles: ...

    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker: ...

    async def verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict: ...

    def server_verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict: ...

    def notice(self, message: discord.Message, guild_id: int, found: AccessVerdict) -> Notice | None: ...


class MessagePipeline:
    """Takes each arrived message through admission and the decider to an answer, one message of a channel at a
    time."""

    def __init__(
        self,
        own_user: Callable[[], discord.ClientUser | None],
        manager: ConversationManager,
        decider: ResponseDecider,
        admission: MessageAdmission,
        *,
        access: Access,
        threads: Threads,
        context: ContextLoader,
        upkeep: ConversationUpkeep,
        answering: Answering,
        decision_log: DecisionLog,
        desk: SupportDesk,
    ) -> None:
        # Parley's own user, known once logged in (discord.py's).
        self.own_user = own_user
        self.manager = manager
        self.decider = decider
        self.admission = admission
        self.access = access
        self.threads = threads
        self.context = context
        self.upkeep = upkeep
        self.answering = answering
        self.decision_log = decision_log
        # The questions nobody addressed in support channels (helpdesk/), answered through `answer_from_documents`.
        self.desk = desk
        # Which messages this process decides: each at most once, whichever way it came (answering/once.py).
        self.claims = MessageClaims(decision_log.stores)

    @property
    def bot_user_id(self) -> int:
        user = self.own_user()
        assert user is not None  # messages arrive only once logged in
        return user.id

    async def arrived(self, arrival: Arrival) -> None:
        """A chat message from someone else than Parley, however it came (the gateway, a resumed session's replay,
        catch-up): claimed first, so it is decided at most once (answering/once.py), then `_admitted`. One another
        process takes up is only heard; one taken up here already, or whose claim could not be stored, is left. A
        failure gives its claim back. A question for the support desk is claimed too: the desk answers it later."""
        record = arrival.record
        self.desk.heard(arrival)
        for_desk = self.desk.candidate(arrival)
        claimed = await self.claims.claim(
            record.message_id, channel_id=record.channel_id, answerable=for_desk or self._answerable(arrival)
        )
        if claimed is Claimed.ELSEWHERE:
            self._hear(arrival)
        if claimed is not Claimed.FIRST:
            return
        try:
            await self._admitted(arrival, for_desk=for_desk)
        except Exception:
            await self.claims.give_back(record.message_id)
            raise

    def _answerable(self, arrival: Arrival) -> bool:
        """Whether the message could be answered: it addresses Parley, or is in a conversation (or a place where
        every message is for Parley)."""
        channel_id = arrival.record.channel_id
        return arrival.addressed or arrival.kind != CHANNEL or self.manager.get(channel_id) is not None

    def _hear(self, arrival: Arrival) -> None:
        """Let the channel's live conversation hear a message another process decides, unless it holds it."""
        record = arrival.record
        if self.admission.optouts.opted_out(arrival.guild_id, record.author_id):
            record = veil(record)
        conversation = self.manager.get(record.channel_id)
        if conversation is not None and all(held.message_id != record.message_id for held in conversation.messages):
            self.manager.record_message(record.channel_id, record)

    async def _admitted(self, arrival: Arrival, *, for_desk: bool = False) -> None:
        """A claimed message: through the bot gate, then `handle`, or the support desk's if it is in a support place,
        addresses nobody and has no live conversation to join (`for_desk`: a question the desk may take)."""
        if not arrival.automated:
            self.admission.bot_gate.human_spoke(arrival.record.channel_id)
        elif self._refuse_automated(arrival):
            return
        record = arrival.record
        if self.admission.optouts.erased(arrival.guild_id, record.author_id, record.message_id):
            return  # delivered again after its author erased it: nothing of it is kept or heard
        if self.admission.optouts.opted_out(arrival.guild_id, record.author_id):
            self._pass_over(arrival)
            return
        if await self._refuse_not_allowed(arrival):
            return
        if self._for_the_desk(arrival):
            self.desk.take(arrival, candidate=for_desk)
            return
        # Unaddressed automated messages go on to be recorded, so the model sees them; the decider's gate
        # never answers them (`other_bot`).
        await self.handle(arrival)

    def withheld(self, guild_id: int, record: MessageRecord) -> bool:
        """Whether the message's author opted out or erased it since it arrived (the desk drops its question)."""
        return self.admission.optouts.withheld(guild_id, record.author_id, record.message_id)

    def in_support(self, channel: object) -> bool:
        """Whether the messages of `channel` are the support desk's to hear (catch-up takes them all up)."""
        return self.desk.in_support(channel)

    def _for_the_desk(self, arrival: Arrival) -> bool:
        """Whether the support desk decides the message: a member's in a support place, addressing nobody, where no
        conversation is live (one that is decides it the normal way)."""
        message = arrival.message
        if message is None or arrival.addressed or arrival.automated or arrival.kind != CHANNEL:
            return False
        return self.manager.get(arrival.record.channel_id) is None and self.desk.in_support(message.channel)

    async def answer_from_documents(self, arrival: Arrival, documents: FromDocuments, support: SupportAnswer) -> None:
        """Answer a question the support desk took, from the documents' sections found for it, as a mention is
        answered: its author's limits and the server's budget first (declined, it stays unanswered and nobody is told:
        nobody asked), then its decision noted, and the answer in the channel's turn.

        A forum post's answer starts the conversation of its thread (the post's place: its asker follows up there); in
        a text channel the answer joins none, so the channel's next questions stay the desk's (a reply to the answer
        addresses Parley, and starts one)."""
        message, record, guild_id = arrival.message, arrival.record, arrival.guild_id
        assert message is not None  # the desk takes messages
        roles = arrival.asker.role_ids
        declined = await self.admission.admit_member(guild_id, message, record, False, roles)
        if declined is not None:
            self.decided_here(record, declined.decision)
            return
        if await self.admission.server_budget_spent(guild_id):
            self.decided_here(record, SERVER_BUDGET)
            await self.admission.give_back(guild_id, record.author_id, roles)
            return
        self.decided_here(record, answered(support))
        # What was said after it, as a conversation's context is shown: without the erased, opted-out members veiled.
        later = self.admission.optouts.veil_all(guild_id, list(documents.after))
        question = replace(arrival.question, support=support, documents=replace(documents, after=tuple(later)))
        arrival = replace(arrival, question=question)
        channel_id = record.channel_id
        in_post = isinstance(message.channel, discord.Thread)
        async with self.admission.channel_turn(channel_id):
            conversation = self.manager.get(channel_id)
            if conversation is None:
                conversation = await (self._start_conversation(arrival) if in_post else self._context_only(arrival))
            async with self.admission.answer_slot():
                await self._answer_while_valid(arrival, MessageReply.to(message), conversation)

    async def asked(self, arrival: Arrival) -> None:
        """A question a member asked by command in public (/ask), admitted by the command: a human spoke, and it
        is handled as their @mention would be."""
        self.admission.bot_gate.human_spoke(arrival.record.channel_id)
        await self.handle(arrival)

    def _pass_over(self, arrival: Arrival) -> None:
        """An opted-out member's message: a live conversation keeps its placeholder, so the talk around it still
        reads; it is never weighed or answered, and where it would have been, the silence is logged `opted_out`."""
        record = veil(arrival.record)
        live = self.manager.record_message(record.channel_id, record)
        if arrival.addressed or live is not None:
            self.decided_here(record, OPTED_OUT)

    async def _refuse_not_allowed(self, arrival: Arrival) -> bool:
        """Whether the access lists keep Parley from answering the message (before anything could call a model);
        a refused one is still recorded, and noted `not_allowed` if it was for Parley or in a conversation.

        Its author is told why once if they addressed Parley (in its own thread or a DM every message does),
        unless the channel is the reason: there Parley stays silent for everyone.
        """
        found = await self.access.verdict(arrival.guild_id, arrival.place, arrival.asker)
        if found.allowed:
            return False
        record = arrival.record
        live = self.manager.record_message(record.channel_id, record)
        for_parley = arrival.addressed or arrival.kind != CHANNEL
        if for_parley or live is not None:
            self.decided_here(record, NOT_ALLOWED)
        if for_parley and not arrival.automated and arrival.message is not None:
            notice = self.access.notice(arrival.message, arrival.guild_id, found)
            if notice is not None:
                await self.answering.tail.tell(notice)
        return True

    def _refuse_automated(self, arrival: Arrival) -> bool:
        """Whether the bot gate turns down an automated message addressed to Parley; a refused one is still recorded."""
        record = arrival.record
        if not arrival.addressed:
            return False
        refusal = self.admission.bot_gate.refusal(record.author_id, record.channel_id)
        if refusal is None:
            return False
        self.manager.record_message(record.channel_id, record)
        self.decided_here(record, refusal)
        return True

    async def handle(self, arrival: Arrival) -> None:
        """Record, decide and answer one message; a channel's messages are decided in arrival order.

        Every message is recorded, so the model sees them all; only answering is limited. While a
        channel is busy, a member's newer mention of Parley (or reply to it) supersedes their
        earlier waiting one, and at most CHANNEL_QUEUE_LIMIT members' mentions wait; the rest are
        recorded, not answered. Other messages wait for their turn to be decided: none of them can
        cost more than a follow-up or a judge call, each limited on its own.

        Whether the message starts a conversation is decided once, when first asked: at once in a channel with
        neither a conversation nor a turn under way, else at its turn if no conversation is live by then.
        """
        message, record = arrival.message, arrival.record
        channel_id = record.channel_id
        live = self.manager.record_message(channel_id, record)
        decided: list[bool] = []  # whether it starts a conversation, once asked (the decider logs its "no")

        def starts() -> bool:
            if not decided:
                decided.append(self._starts_conversation(arrival))
            return decided[0]

        if live is None and self.admission.idle(channel_id) and not starts():
            return  # nothing is starting a conversation here, so this message was decided at once
        in_line = arrival.addressed
        answerable = True
        if in_line and not self.admission.join_line(channel_id, record):
            self.decided_here(record, QUEUE_FULL)
            if live is not None:
                return  # recorded already; a full line has waiters, who clear the turn away
            in_line = answerable = False  # it waits only to be recorded in order
        async with self.admission.channel_turn(channel_id):
            if self.admission.optouts.withheld(arrival.guild_id, record.author_id, record.message_id):
                # Its author opted out or erased it while it waited: it is neither recorded nor answered.
                if in_line:
                    self.admission.leave_line(channel_id, record.message_id)
                return
            if in_line and not self.admission.leave_line(channel_id, record.message_id):
                self.decided_here(record, SUPERSEDED)
                answerable = False
            if not answerable:
                self._record_late(record, live)
                return
            # A command's answer goes into its own response: only a message may have a thread opened on it.
            opens = message is not None and await self.threads.opens_thread(message, record, arrival.asker.role_ids)
            thread = await self.threads.open_thread(message, record) if message is not None and opens else None
            if thread is not None:
                await self._answer_in_thread(arrival.moved_to(thread, OWN_THREAD), thread)
                return
            conversation = self.manager.get(channel_id)
            if conversation is None and starts():
                conversation = await self._start_conversation(arrival)
            elif conversation is not None and conversation is not live:
                self.manager.record_message(channel_id, record)
            if conversation is not None:
                await self._decide_and_answer(arrival, conversation)

    def _starts_conversation(self, arrival: Arrival) -> bool:
        """Whether the message starts a conversation: any message in a thread Parley opened or in a DM, and in a
        channel what the decider says starts one (an @mention of Parley or a reply to it)."""
        return arrival.kind != CHANNEL or self.decider.should_start_conversation(arrival.record, self.bot_user_id)[0]

    async def _start_conversation(self, arrival: Arrival) -> ChannelConversation:
        """Start the channel's conversation with the message, from the context before it and earlier summaries."""
        channel_id = arrival.record.channel_id
        context, earlier = await self._opening(arrival)
        conversation = self.manager.start(channel_id, context, kind=arrival.kind)
        conversation.earlier_conversations = earlier
        self.manager.record_message(channel_id, arrival.record)
        return conversation

    async def _answer_in_thread(self, arrival: Arrival, thread: discord.Thread) -> None:
        """Start the thread's conversation with the question that opened it, and answer it there.

        The thread's own turn is held while answering, so what members write in it meanwhile waits its turn.
        """
        async with self.admission.channel_turn(thread.id):
            conversation = self.manager.start(thread.id, kind=OWN_THREAD)
            self.manager.record_message(thread.id, arrival.record)
            await self._decide_and_answer(arrival, conversation, thread)

    async def answer_aside(self, arrival: Arrival, logged: MessageRecord) -> None:
        """Answer a question its asker alone sees (/ask private), admitted already: from the channel's live
        conversation, or the context a mention would start one from, as far as they may read it. Nothing of it is
        kept: neither the question nor the answer joins a conversation, and none is started. `logged` is the
        question as `/parley why` shows it."""
        channel_id, outlet = arrival.record.channel_id, arrival.outlet
        assert outlet is not None  # a command brings the outlet its answer goes to
        async with self.admission.channel_turn(channel_id), self.admission.answer_slot():
            if await self.admission.server_budget_spent(arrival.guild_id):
                self.decided_here(logged, SERVER_BUDGET)
                return
            conversation = self.manager.get(channel_id) or await self._context_only(arrival)
            self.decided_here(logged, ASKED_PRIVATELY)
            await self._answer_while_valid(arrival, outlet, conversation)

    async def _context_only(self, arrival: Arrival) -> ChannelConversation:
        """What a conversation started by the question would hold before it, kept by no one."""
        channel_id = arrival.record.channel_id
        context, earlier = await self._opening(arrival)
        conversation = ChannelConversation.opened(
            channel_id, context, kind=arrival.kind, now=arrival.record.timestamp, max_messages=self.manager.max_messages
        )
        conversation.earlier_conversations = earlier
        return conversation

    async def _opening(self, arrival: Arrival) -> tuple[list[MessageRecord], str]:
        """What a conversation the question starts opens with: the channel's messages before it, and its earlier
        conversations' summaries."""
        earlier_messages = await self.context.load_context(arrival.question.channel, arrival.question.id)
        # Opted-out members' messages before it are shown only as placeholders, wherever the context came from.
        context = self.admission.optouts.veil_all(arrival.guild_id, earlier_messages)
        return context, await self.upkeep.earlier_conversations(arrival.record.channel_id)

    def _record_late(self, record: MessageRecord, live: ChannelConversation | None) -> None:
        """Record a message that will not be answered in the conversation that began while it waited."""
        conversation = self.manager.get(record.channel_id)
        if conversation is not None and conversation is not live:
            self.manager.record_message(record.channel_id, record)

    async def _decide_and_answer(
        self, arrival: Arrival, conversation: ChannelConversation, where: discord.Thread | None = None
    ) -> None:
        """Put the message to the decider unless its author is over their rate; answer (in `where`, if given) if it
        says so. A command's question was admitted by the command already (commands/ask.py)."""
        message, record, guild_id = arrival.message, arrival.record, arrival.guild_id
        roles = arrival.asker.role_ids
        if message is not None:
            declined = await self.admission.admit_member(guild_id, message, record, arrival.addressed, roles)
            if declined is not None:
                await self._declined(record, declined)
                return
        decision = self.decider.decide_now(record, conversation, self.bot_user_id)
        if not isinstance(decision, Decision):
            judged = await self.admission.judged(guild_id, decision)
            if isinstance(judged, Declined):
                await self._declined(record, judged)
                judged = judged.decision
            decision = judged
        if not decision.respond:
            await self.admission.give_back(guild_id, record.author_id, roles)
            return
        async with self.admission.answer_slot():
            await self.answer(arrival, conversation, where)

    async def answer(
        self, arrival: Arrival, conversation: ChannelConversation, where: discord.Thread | None = None
    ) -> None:
        """Answer the message (in `where`, a thread opened for it, if given; a command's through its outlet), unless
        its server's token budget for the day is spent (`decline_over_budget`; a command tells its asker itself)."""
        message, record = arrival.message, arrival.record
        if await self.admission.server_budget_spent(arrival.guild_id):
            if message is None:
                self.decided_here(record, SERVER_BUDGET)
            else:
                await self._declined(record, self.admission.decline_over_budget(arrival.guild_id, message, where))
            return
        outlet = arrival.outlet
        if outlet is None:
            assert message is not None  # only a command brings an outlet of its own
            outlet = MessageReply.to(message, where)
        await self._answer_while_valid(arrival, outlet, conversation)

    async def _answer_while_valid(self, arrival: Arrival, outlet: Outlet, conversation: ChannelConversation) -> None:
        """Answer, unless the question is a command's whose token expired while it waited (behind a busy channel, a
        long approval): its answer could go nowhere, so no model is called and the answer is given back."""
        if isinstance(outlet, InteractionReply) and outlet.expired:
            log.warning("not answering command %s: its interaction expired while it waited", arrival.question.id)
            await self.admission.give_back(arrival.guild_id, arrival.record.author_id, arrival.asker.role_ids)
            return
        await self.answering.answer(arrival.question, outlet, conversation, arrival.asker.role_ids)

    async def regenerate_refusal(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> str | None:
        """Why `member` may not regenerate `turn` now (its asker no longer allowed there, their limits, the server's
        budget); None: they may, and it spent one of their answers, which `regenerate` gives back if it makes no
        model call. The answer is written again for its asker, so the access lists are theirs to pass (with the
        roles they hold now: an answer to a question read from history knows none of them)."""
        question = turn.question
        guild_id = guild_id_of(question)
        if guild_id:  # Regenerate is guild-only; a DM's question would have no server's lists
            asker = await self.access.asker(guild_id, question.author)
            if not self.access.server_verdict(guild_id, access_place(question.channel), asker).allowed:
                return REGENERATE_NOT_ALLOWED
        clicker = await self.access.asker(guild_id, member)
        return await self.admission.regenerate_refusal(guild_id, member.id, clicker.role_ids)

    async def regenerate(self, turn: AnsweredTurn, member: discord.Member | discord.User) -> None:
        """ "Regenerate", admitted for `member` (edge/streaming.py); nothing changes if the conversation has ended."""
        question, channel = turn.question, turn.channel
        channel_id: int = getattr(channel, "id", question.channel.id)
        guild_id = guild_id_of(question)
        # The channel's turn is kept while a call waits for approval: an answer in between would leave the one being
        # rewritten no longer the latest, and its rewrite would drop that answer from the conversation.
        channel_turn = self.admission.channel_turn(channel_id, let_go_for_approval=False)
        async with channel_turn, self.admission.answer_slot():
            conversation = self.manager.get(channel_id)
            gone = (
                conversation is None
                or self.answering.streams.latest(channel_id) is not turn
                or is_closed_thread(channel)
            )
            if gone or await self.admission.server_budget_spent(guild_id):
                clicker = await self.access.asker(guild_id, member)
                await self.admission.give_back(guild_id, member.id, clicker.role_ids)
                return
            assert conversation is not None
            asker = await self.access.asker(guild_id, question.author)
            await self.answering.regenerate(turn, conversation, asker.role_ids)

    async def _declined(self, record: MessageRecord, declined: Declined) -> None:
        """A message admission leaves unanswered: its decision noted, and its author told what admission says to."""
        self.decided_here(record, declined.decision)
        if declined.notice is not None:
            await self.answering.tail.tell(declined.notice)

    def decided_here(self, record: MessageRecord, decision: Decision) -> None:
        """A decision the bot makes itself (a limit's, or a spent budget overruling the decider), logged and kept
        for `/parley why` like the decider's; a later one on the same message replaces the earlier."""
        self.decision_log.note(record, decision)
        log_decision(record, decision)
