"""The conversation engine: which channels Parley is talking in, and whether to answer a message.

Nothing here knows about Discord. Time comes from an injected clock, so tests (freezegun) and
`replay.py` (message timestamps) drive it; the bot adapts discord.py objects into `MessageRecord`s.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol

from pydantic_ai.messages import ModelMessage

Clock = Callable[[], datetime]

decision_log = logging.getLogger("parley.decisions")


def utc_now() -> datetime:
    """The current UTC time, read at call time (so freezegun and replays can move it)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One channel message, reduced to what the engine needs."""

    message_id: int
    channel_id: int
    author_id: int
    author: str
    content: str
    timestamp: datetime
    is_bot: bool = False
    mention_ids: frozenset[int] = frozenset()
    reply_to_author_id: int | None = None
    # Discord resolves @everyone/@here and role mentions separately from user mentions.
    mentions_everyone: bool = False


@dataclass(slots=True)
class ChannelConversation:
    """A channel's live conversation: everything said while it is active, answered or not."""

    channel_id: int
    started_at: datetime
    last_activity: datetime
    messages: deque[MessageRecord]
    llm_history: list[ModelMessage] = field(default_factory=list)
    participants: set[int] = field(default_factory=set)
    # The latest message of each author, so the decider asks "when did the bot last speak, and
    # to whom" in O(1) instead of scanning the transcript.
    last_message_by_author: dict[int, MessageRecord] = field(default_factory=dict)
    bot_turns: int = 0

    def messages_since(self, author_id: int) -> list[MessageRecord]:
        """Messages after `author_id`'s latest one (all of them if that author has not spoken)."""
        tail: list[MessageRecord] = []
        for message in reversed(self.messages):
            if message.author_id == author_id:
                break
            tail.append(message)
        tail.reverse()
        return tail


class ConversationManager:
    """One activity-timed conversation per channel, with bounded memory.

    Conversations are kept in least-recently-active order, so each call evicts the expired ones
    at the front in O(1) amortised time: a bot in 10,000 channels that fall silent does not keep
    10,000 dead conversations even if those channels never speak again.
    """

    def __init__(
        self,
        timeout_seconds: float = 120,
        *,
        max_messages: int = 500,
        clock: Clock = utc_now,
    ) -> None:
        self.timeout = timedelta(seconds=timeout_seconds)
        self.max_messages = max_messages
        self.clock = clock
        self._conversations: OrderedDict[int, ChannelConversation] = OrderedDict()
        # No conversation can expire before this instant, so the per-call sweep is one comparison.
        self._nothing_expires_before = datetime.max.replace(tzinfo=timezone.utc)

    def __len__(self) -> int:
        return len(self._conversations)

    def get(self, channel_id: int) -> ChannelConversation | None:
        """The channel's conversation, or None if there is none or it has expired."""
        self._evict_expired(self.clock())
        return self._conversations.get(channel_id)

    def start(self, channel_id: int, initial_messages: Iterable[MessageRecord] = ()) -> ChannelConversation:
        """Start (or restart) the channel's conversation with earlier messages as context."""
        now = self.clock()
        self._evict_expired(now)
        conversation = ChannelConversation(
            channel_id=channel_id,
            started_at=now,
            last_activity=now,
            messages=deque(initial_messages, maxlen=self.max_messages),
        )
        for message in conversation.messages:
            conversation.last_message_by_author[message.author_id] = message
        self._conversations[channel_id] = conversation
        self._touch(conversation, now)
        return conversation

    def record_message(self, channel_id: int, message: MessageRecord) -> ChannelConversation | None:
        """Append a message to the channel's live conversation and keep it alive.

        Returns the conversation, or None when the channel has none (the message is not kept).
        """
        now = self.clock()
        self._evict_expired(now)
        conversation = self._conversations.get(channel_id)
        if conversation is None:
            return None
        conversation.messages.append(message)
        conversation.last_message_by_author[message.author_id] = message
        if not message.is_bot:
            conversation.participants.add(message.author_id)
        self._touch(conversation, now)
        return conversation

    def record_bot_response(self, channel_id: int, llm_history: list[ModelMessage]) -> None:
        """Store the model history of a successful answer as the conversation's new history."""
        conversation = self.get(channel_id)
        if conversation is None:
            return
        conversation.llm_history = list(llm_history)
        conversation.bot_turns += 1
        self._touch(conversation, self.clock())

    def end(self, channel_id: int) -> ChannelConversation | None:
        """End the channel's conversation now; returns it, or None if there was none."""
        return self._conversations.pop(channel_id, None)

    def active(self) -> list[ChannelConversation]:
        """Every live conversation, least recently active first."""
        self._evict_expired(self.clock())
        return list(self._conversations.values())

    def evict_expired(self) -> int:
        """Drop every conversation idle for longer than the timeout; returns how many."""
        return self._evict_expired(self.clock())

    def _evict_expired(self, now: datetime) -> int:
        if now <= self._nothing_expires_before:
            return 0
        deadline = now - self.timeout
        evicted = 0
        conversations = self._conversations
        while conversations:
            oldest = next(iter(conversations.values()))
            if oldest.last_activity >= deadline:
                self._nothing_expires_before = oldest.last_activity + self.timeout
                return evicted
            conversations.popitem(last=False)
            evicted += 1
        self._nothing_expires_before = datetime.max.replace(tzinfo=timezone.utc)
        if evicted:
            # A dict never shrinks its table on deletion; a fresh one gives the memory back.
            self._conversations = OrderedDict()
        return evicted

    def _touch(self, conversation: ChannelConversation, now: datetime) -> None:
        conversation.last_activity = now
        self._conversations.move_to_end(conversation.channel_id)
        self._nothing_expires_before = min(self._nothing_expires_before, now + self.timeout)


# --- Deciding ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """One answer-or-not decision, with a short machine-readable reason and its tier."""

    respond: bool
    reason: str
    tier: str
    confidence: float | None = None
    # The judge's own words, for operators; `reason` stays a short fixed vocabulary.
    detail: str | None = None


JudgeVerdict = tuple[bool, str] | tuple[bool, str, float]
Judge = Callable[[MessageRecord, ChannelConversation], Awaitable[JudgeVerdict]]
DecisionListener = Callable[[MessageRecord, Decision], None]


class DecisionPolicy(Protocol):
    """What the bot and the replay tool need from a decider; `ResponseDecider` is the default."""

    def should_start_conversation(self, message: MessageRecord, bot_user_id: int) -> tuple[bool, str]: ...

    async def should_respond(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> tuple[bool, str]: ...


_CONTINUATION = re.compile(r"^(and|also|what about|how about|why|but|so|then|ok|okay|thanks|thank you)\b", re.I)


class ResponseDecider:
    """Decides in tiers whether Parley answers a message; every decision is logged with its reason.

    1. explicit: a mention of the bot or a reply to it is always answered;
    2. gates: a message addressed to someone else, or from another bot, is left alone;
    3. follow-up: inside the follow-up window, a message from the person the bot was just
       answering, with nobody else having cut in, is answered;
    4. judge: what is still ambiguous goes to the LLM judge, when one is configured;
    5. otherwise no answer.
    """

    def __init__(
        self,
        followup_window_seconds: float = 60,
        judge: Judge | None = None,
        *,
        judge_timeout_seconds: float = 5,
        clock: Clock = utc_now,
        on_decision: DecisionListener | None = None,
    ) -> None:
        self.followup_window = timedelta(seconds=followup_window_seconds)
        self.judge = judge
        self.judge_timeout = judge_timeout_seconds
        self.clock = clock
        self.on_decision = on_decision
        self.judge_calls = 0

    def should_start_conversation(self, message: MessageRecord, bot_user_id: int) -> tuple[bool, str]:
        """An @mention of the bot or a reply to it starts a conversation."""
        decision = self._explicit(message, bot_user_id) or Decision(False, "no_conversation", "start")
        self._log(message, decision)
        return decision.respond, decision.reason

    async def should_respond(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> tuple[bool, str]:
        """Whether to answer a message of a live conversation, and why."""
        decision = await self.decide(message, conversation, bot_user_id)
        return decision.respond, decision.reason

    async def decide(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> Decision:
        """`should_respond` with the tier and the judge's confidence kept."""
        decision = (
            self._explicit(message, bot_user_id)
            or self._gate(message, bot_user_id)
            or self._followup(message, conversation, bot_user_id)
        )
        if decision is None:
            decision = await self._ask_judge(message, conversation)
        self._log(message, decision)
        return decision

    def _explicit(self, message: MessageRecord, bot_user_id: int) -> Decision | None:
        if bot_user_id in message.mention_ids:
            return Decision(True, "mention", "explicit")
        if message.reply_to_author_id == bot_user_id:
            return Decision(True, "reply_to_bot", "explicit")
        return None

    def _gate(self, message: MessageRecord, bot_user_id: int) -> Decision | None:
        if message.is_bot:
            return Decision(False, "other_bot", "gate")
        if message.reply_to_author_id is not None:
            return Decision(False, "reply_to_other", "gate")
        if message.mention_ids - {message.author_id}:
            return Decision(False, "addressed_to_other", "gate")
        if not message.content.strip():
            return Decision(False, "no_text", "gate")
        return None

    def _followup(
        self, message: MessageRecord, conversation: ChannelConversation, bot_user_id: int
    ) -> Decision | None:
        last_bot_message = conversation.last_message_by_author.get(bot_user_id)
        if last_bot_message is None:
            return Decision(False, "bot_silent", "followup")
        if self.clock() - last_bot_message.timestamp > self.followup_window:
            return Decision(False, "outside_window", "followup")
        if message.author_id in _addressees(last_bot_message):
            others_since = {
                m.author_id
                for m in conversation.messages_since(bot_user_id)
                if m.author_id not in (message.author_id, bot_user_id) and not m.is_bot
            }
            if not others_since:
                return Decision(True, "followup", "followup")
            if _CONTINUATION.match(message.content.strip()):
                return Decision(True, "followup_continuation", "followup")
        if self.judge is None:
            return Decision(False, "not_for_bot", "followup")
        return None

    async def _ask_judge(self, message: MessageRecord, conversation: ChannelConversation) -> Decision:
        assert self.judge is not None
        self.judge_calls += 1
        try:
            verdict = await asyncio.wait_for(self.judge(message, conversation), self.judge_timeout)
        except TimeoutError:
            return Decision(False, "judge_timeout", "judge")
        except Exception as error:  # a judge is a model call: any failure means "stay silent"
            decision_log.warning("judge failed: %r", error)
            return Decision(False, "judge_error", "judge")
        respond, detail, *rest = verdict
        confidence = rest[0] if rest else None
        return Decision(respond, f"judge_{'yes' if respond else 'no'}", "judge", confidence, detail)

    def _log(self, message: MessageRecord, decision: Decision) -> None:
        if self.on_decision is not None:
            self.on_decision(message, decision)
        # Silence without a conversation is the common case in a busy server: debug, not info.
        level = logging.DEBUG if decision.reason == "no_conversation" else logging.INFO
        if not decision_log.isEnabledFor(level):
            return
        decision_log.log(
            level,
            "%s message %s in channel %s by %s: %s (%s)",
            "answer" if decision.respond else "ignore",
            message.message_id,
            message.channel_id,
            message.author,
            decision.reason,
            decision.tier,
            extra={
                "channel_id": message.channel_id,
                "message_id": message.message_id,
                "author_id": message.author_id,
                "author": message.author,
                "respond": decision.respond,
                "reason": decision.reason,
                "tier": decision.tier,
                "confidence": decision.confidence,
                "detail": decision.detail,
            },
        )


def _addressees(bot_message: MessageRecord) -> frozenset[int]:
    """Whom a bot message was answering: the person it replied to, or those it mentioned."""
    if bot_message.reply_to_author_id is not None:
        return bot_message.mention_ids | {bot_message.reply_to_author_id}
    return bot_message.mention_ids
