"""The conversation engine: which channels Parley is talking in, and what each conversation holds
(deciding/channel_conversation.py); with it, whether to answer a message (`ResponseDecider`, deciding/decider.py's).

Nothing here knows about Discord. Time comes from an injected clock, so tests (freezegun) and
`eval/replay.py` (message timestamps) drive it; the bot adapts discord.py objects into `MessageRecord`s.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage

from deciding.channel_conversation import (
    ChannelConversation,
    Clock,
    erased_history,
    insert_in_order,
    redacted,
    utc_now,
)
from deciding.decider import ResponseDecider
from records import CHANNEL, OWN_THREAD, MessageRecord

# The engine, as its users import it (the project's design: the conversations and the decider, over the messages).
__all__ = [
    "ChannelConversation",
    "Clock",
    "ConversationListener",
    "ConversationManager",
    "EndListener",
    "MessageRecord",
    "ResponseDecider",
    "erased_history",
    "redacted",
    "utc_now",
]

ConversationListener = Callable[["ChannelConversation"], None]
# Told of a conversation that ended, and whether it ran out of time (rather than being ended on purpose).
EndListener = Callable[["ChannelConversation", bool], None]

_NEVER = datetime.max.replace(tzinfo=UTC)
_DAWN = datetime.min.replace(tzinfo=UTC)


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
        on_change: ConversationListener | None = None,
        on_end: EndListener | None = None,
    ) -> None:
        self.timeout = timedelta(seconds=timeout_seconds)
        self.max_messages = max_messages
        self.clock = clock
        # Told whenever a conversation's state changes, so it can be kept beyond this process
        # (upkeep/conversation_snapshots.py).
        self.on_change = on_change
        self.on_end = on_end
        self._conversations: OrderedDict[int, ChannelConversation] = OrderedDict()
        # Conversations the timeout does not end (`ChannelConversation.lasting`), kept apart so the sweep never
        # walks past them.
        self._lasting: dict[int, ChannelConversation] = {}
        # No conversation can expire before this instant, so the per-call sweep is one comparison.
        self._nothing_expires_before = _NEVER
        # Replayed logs can step back in time, which breaks "least recently active first";
        # from then on each lookup also checks its own conversation's age.
        self._latest = _DAWN
        self._clock_went_back = False

    def __len__(self) -> int:
        return len(self._conversations) + len(self._lasting)

    def live(self) -> list[ChannelConversation]:
        """Every live conversation (those timed out end first)."""
        self._evict_expired(self.clock())
        return [*self._conversations.values(), *self._lasting.values()]

    def lasting(self) -> list[ChannelConversation]:
        """The conversations that end only when they are ended (threads Parley opened)."""
        return list(self._lasting.values())

    def get(self, channel_id: int) -> ChannelConversation | None:
        """The channel's conversation, or None if there is none or it has expired."""
        return self._live(channel_id, self.clock())

    def start(
        self, channel_id: int, initial_messages: Iterable[MessageRecord] = (), *, kind: str = CHANNEL
    ) -> ChannelConversation:
        """Start (or restart) the channel's conversation with earlier messages as context; `kind`: where it is."""
        now = self.clock()
        self._evict_expired(now)
        conversation = ChannelConversation.opened(
            channel_id, initial_messages, kind=kind, now=now, max_messages=self.max_messages
        )
        self._end(self._pop(channel_id), expired=False)
        if conversation.lasting:
            self._lasting[channel_id] = conversation
        else:
            self._conversations[channel_id] = conversation
            self._touch(conversation, now)
        self._changed(conversation)
        return conversation

    def adopt(self, conversation: ChannelConversation) -> bool:
        """Take over a conversation kept from an earlier run, as it was; False (and nothing kept) if it has expired.

        Adopt before any channel speaks, oldest activity first: conversations are kept in order of activity.
        """
        now = self.clock()
        channel_id = conversation.channel_id
        if channel_id in self._conversations or channel_id in self._lasting:
            return False
        if conversation.lasting:
            conversation.messages = deque(conversation.messages, maxlen=self.max_messages)
            self._lasting[channel_id] = conversation
            return True
        if now - conversation.last_activity > self.timeout:
            return False
        conversation.messages = deque(conversation.messages, maxlen=self.max_messages)
        self._conversations[conversation.channel_id] = conversation
        self._latest = max(self._latest, conversation.last_activity)
        self._nothing_expires_before = min(self._nothing_expires_before, conversation.last_activity + self.timeout)
        return True

    def record_message(self, channel_id: int, message: MessageRecord) -> ChannelConversation | None:
        """Append a message to the channel's live conversation and keep it alive.

        Returns the conversation, or None when the channel has none (the message is not kept).
        """
        now = self.clock()
        if now > self._nothing_expires_before or self._lasting or self._clock_went_back:
            conversation = self._live(channel_id, now)
        else:
            # `_live`'s common case, inlined: nothing to evict, no thread to look in, no clock to distrust.
            conversation = self._conversations.get(channel_id)
        if conversation is None:
            return None
        messages = conversation.messages
        if messages and messages[-1].message_id > message.message_id:
            insert_in_order(messages, message)
        else:
            messages.append(message)
        conversation.last_message_by_author[message.author_id] = message
        if message.is_bot:
            conversation.note_bot_message(message)
        else:
            conversation.participants.add(message.author_id)
        # `_touch`, inlined for the common case: every message of every channel comes through here
        # (and `lasting` too: a property costs a call).
        if conversation.kind == OWN_THREAD:
            conversation.last_activity = now
        elif now >= self._latest and self._nothing_expires_before is not _NEVER:
            conversation.last_activity = self._latest = now
            self._conversations.move_to_end(channel_id)
        else:
            self._touch(conversation, now)
        if self.on_change is not None:
            self.on_change(conversation)
        return conversation

    def record_bot_response(self, channel_id: int, llm_history: list[ModelMessage], answered_id: int) -> None:
        """Store the model history of a successful answer to message `answered_id` as the conversation's new history.

        Everything up to `answered_id` has now been shown to the model; edits and deletions that
        arrived while it wrote are applied to the new history too.
        """
        conversation = self.get(channel_id)
        if conversation is None:
            return
        conversation.llm_history = redacted(llm_history, conversation.redactions, conversation.files_kept)
        conversation.prompted_through = max(conversation.prompted_through, answered_id)
        conversation.bot_turns += 1
        self._touch(conversation, self.clock())
        self._changed(conversation)

    def replace_last_bot_turn(self, channel_id: int, llm_history: list[ModelMessage]) -> None:
        """Store the model history of a regenerated answer: it replaces the last turn, so no turn is added."""
        conversation = self.get(channel_id)
        if conversation is None:
            return
        conversation.llm_history = redacted(llm_history, conversation.redactions, conversation.files_kept)
        self._touch(conversation, self.clock())
        self._changed(conversation)

    def end(self, channel_id: int) -> ChannelConversation | None:
        """End the channel's conversation now; returns it, or None if there was none."""
        conversation = self._pop(channel_id)
        self._end(conversation, expired=False)
        return conversation

    def _pop(self, channel_id: int) -> ChannelConversation | None:
        conversation = self._conversations.pop(channel_id, None)
        return self._lasting.pop(channel_id, None) if conversation is None else conversation

    def changed(self, channel_id: int) -> None:
        """Say that the channel's conversation changed outside the manager (an edit or a deletion applied to it)."""
        conversation = self._conversations.get(channel_id) or self._lasting.get(channel_id)
        if conversation is not None:
            self._changed(conversation)

    def _changed(self, conversation: ChannelConversation) -> None:
        if self.on_change is not None:
            self.on_change(conversation)

    def _end(self, conversation: ChannelConversation | None, *, expired: bool) -> None:
        if conversation is not None and self.on_end is not None:
            self.on_end(conversation, expired)

    def evict_expired(self) -> int:
        """Drop every conversation idle for longer than the timeout; returns how many."""
        return self._evict_expired(self.clock())

    def _live(self, channel_id: int, now: datetime) -> ChannelConversation | None:
        if now > self._nothing_expires_before:
            self._evict_expired(now)
        if self._lasting:
            lasting = self._lasting.get(channel_id)
            if lasting is not None:
                return lasting
        conversation = self._conversations.get(channel_id)
        if conversation is not None and self._clock_went_back and now - conversation.last_activity > self.timeout:
            del self._conversations[channel_id]
            self._end(conversation, expired=True)
            return None
        return conversation

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
            self._end(oldest, expired=True)
            evicted += 1
        self._nothing_expires_before = _NEVER
        if evicted:
            # A dict never shrinks its table on deletion; a fresh one gives the memory back.
            self._conversations = OrderedDict()
        return evicted

    def _touch(self, conversation: ChannelConversation, now: datetime) -> None:
        conversation.last_activity = now
        if conversation.lasting:
            return
        self._conversations.move_to_end(conversation.channel_id)
        if now >= self._latest:
            self._latest = now
            if self._nothing_expires_before is not _NEVER:
                return  # time moved forward: the oldest conversation still expires first
        else:
            self._clock_went_back = True
        self._nothing_expires_before = min(self._nothing_expires_before, now + self.timeout)
