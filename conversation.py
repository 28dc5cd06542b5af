"""The conversation engine: which channels Parley is talking in, and what each conversation holds (whether to
answer a message is decider.py's).

Nothing here knows about Discord. Time comes from an injected clock, so tests (freezegun) and
`replay.py` (message timestamps) drive it; the bot adapts discord.py objects into `MessageRecord`s.
"""

from __future__ import annotations

import bisect
import copy
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ToolReturnPart,
    UserPromptPart,
)

from files.history import Removals, images_without_removed, kept_files, without_removed
from quoting import requote, unattributed
from records import (
    CHANNEL,
    OPTED_OUT_AUTHOR,
    OPTED_OUT_TEXT,
    OWN_THREAD,
    AnswerPosts,
    AttachmentInfo,
    MessageRecord,
)

Clock = Callable[[], datetime]
ConversationListener = Callable[["ChannelConversation"], None]
# Told of a conversation that ended, and whether it ran out of time (rather than being ended on purpose).
EndListener = Callable[["ChannelConversation", bool], None]

_NEVER = datetime.max.replace(tzinfo=UTC)
_DAWN = datetime.min.replace(tzinfo=UTC)


def utc_now() -> datetime:
    """The current UTC time, read at call time (so freezegun and replays can move it)."""
    return datetime.now(UTC)


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
    # The latest bot message naming each person, and the latest naming nobody: the decider
    # skips its look-back for a person no recent bot turn can have been answering.
    bot_message_naming: dict[int, MessageRecord] = field(default_factory=dict)
    last_unnamed_bot_message: MessageRecord | None = None
    # The newest message of the loaded context: the bot's own posts after it are this conversation's,
    # already in `llm_history` as its answers (or notices the model needn't see).
    opened_after_id: int = 0
    # The newest message a successful answer showed the model; newer ones are still news to it, even
    # those that sort before the bot's post because they arrived while it was writing.
    prompted_through: int = 0
    # Edits (new text) and deletions (None) of messages already shown, applied to every model history
    # this conversation keeps, including one written while they happened.
    redactions: dict[int, str | None] = field(default_factory=dict)
    # The files still on each message an edit took files off (`files.history.kept_files`), applied
    # the same way: the model no longer sees a file its member removed.
    files_kept: dict[int, frozenset[str]] = field(default_factory=dict)
    # Summaries of the channel's earlier conversations, quoted (`context.render_earlier_conversations`),
    # which the first prompt of this one carries.
    earlier_conversations: str = ""
    # CHANNEL, OWN_THREAD or DIRECT (see CONVERSATION_KINDS).
    kind: str = CHANNEL
    # What "Regenerate" may replace, kept with the conversation so that it outlives a restart.
    latest_answer: AnswerPosts | None = None
    # How many bot turns named each person over the whole conversation, beyond the look-back: counted on the
    # bot's messages only, so the many messages of others pay nothing for it (the learned tier reads it).
    bot_namings: dict[int, int] = field(default_factory=dict)

    @classmethod
    def opened(
        cls,
        channel_id: int,
        initial_messages: Iterable[MessageRecord],
        *,
        kind: str,
        now: datetime,
        max_messages: int | None = None,
    ) -> ChannelConversation:
        """A conversation opening at `now` on earlier messages as context (`ConversationManager.start` keeps it)."""
        conversation = cls(
            channel_id=channel_id,
            started_at=now,
            last_activity=now,
            messages=deque(initial_messages, maxlen=max_messages),
            kind=kind,
        )
        conversation.opened_after_id = max((m.message_id for m in conversation.messages), default=0)
        for message in conversation.messages:
            conversation.last_message_by_author[message.author_id] = message
            if message.is_bot:
                conversation.note_bot_message(message)
        return conversation

    @property
    def lasting(self) -> bool:
        """Whether the conversation ignores the inactivity timeout: a thread Parley opened lives while it is open."""
        return self.kind == OWN_THREAD

    def note_bot_message(self, message: MessageRecord) -> None:
        """Index a bot's message by whom it names (any bot's: the index only has to be a superset)."""
        named = message.mention_ids
        namings = self.bot_namings
        reply_to = message.reply_to_author_id
        if reply_to is not None:
            self.bot_message_naming[reply_to] = message
            namings[reply_to] = namings.get(reply_to, 0) + 1
        elif not named:
            self.last_unnamed_bot_message = message
        for person in named:
            self.bot_message_naming[person] = message
            if person != reply_to:
                namings[person] = namings.get(person, 0) + 1

    def unseen_before(self, message_id: int, bot_user_id: int) -> list[MessageRecord]:
        """The messages before `message_id` that no answer has shown the model yet, oldest first.

        The bot's earlier posts from the loaded context are included (a new conversation knows what it
        last said and to what); its posts in this conversation are not (they are its own history).
        """
        return [
            message
            for message in self.messages
            if self.prompted_through < message.message_id < message_id
            and not (message.author_id == bot_user_id and message.message_id > self.opened_after_id)
        ]

    def edit(self, message_id: int, content: str) -> bool:
        """Apply an edit to the conversation's record and model history; whether the message is in it.

        The placeholder of an opted-out member's message stays one: an edit would show what they wrote.
        """
        if any(m.message_id == message_id and _is_placeholder(m) for m in self.messages):
            return False
        return self._redact(message_id, content)

    def delete(self, message_id: int) -> bool:
        """Drop a deleted message from the conversation and its text from the model history."""
        return self._redact(message_id, None)

    def erase(self, message_ids: Collection[int]) -> bool:
        """Delete these messages (a member's whose data was erased) and take their author off every quote of them
        in the model history; whether the conversation changed."""
        # Every one is deleted (no short cut): a list, not a generator.
        deleted = any([self.delete(message_id) for message_id in message_ids])  # noqa: C419
        history = unattributed_history(self.llm_history, message_ids)
        changed = history != self.llm_history
        self.llm_history = history
        return deleted or changed

    def keep_files(self, message_id: int, attachments: tuple[AttachmentInfo, ...]) -> bool:
        """Apply an edit that took files off a message: only `attachments` remain; whether the conversation changed.

        The model's history shows each file with its id; one written before it did is matched by name.
        """
        found = next((m for m in self.messages if m.message_id == message_id), None)
        if found is not None:
            if {a.attachment_id for a in found.attachments} <= {a.attachment_id for a in attachments}:
                return False  # nothing was removed (Discord sends the files with every edit)
            self.messages.remove(found)
            _insert_in_order(self.messages, replace(found, attachments=attachments))
        elif message_id > self.prompted_through:
            return False  # never shown to the model, nor part of this conversation
        kept = kept_files(attachments)
        history = redacted(self.llm_history, {}, {message_id: kept})
        if found is None and history == self.llm_history:
            return False
        # A summary written while the file was there may repeat it, as for a deleted message.
        history = [message for message in history if not _summarises(message, message_id)]
        self.files_kept[message_id] = kept
        self.llm_history = history
        return True

    def _redact(self, message_id: int, content: str | None) -> bool:
        found = next((m for m in self.messages if m.message_id == message_id), None)
        if found is None and message_id > self.prompted_through:
            return False  # never shown to the model, nor part of this conversation
        if found is not None:
            self.messages.remove(found)
            if content is not None:
                _insert_in_order(self.messages, replace(found, content=content))
        self.redactions[message_id] = content
        history = redacted(self.llm_history, {message_id: content})
        if content is None:
            # A summary written from the deleted message may repeat it: the turns it stood for are gone with it.
            history = [message for message in history if not _summarises(message, message_id)]
        self.llm_history = history
        return True


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
        # (conversation_snapshots.py).
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
            _insert_in_order(messages, message)
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


def _is_placeholder(message: MessageRecord) -> bool:
    return message.author == OPTED_OUT_AUTHOR and message.content == OPTED_OUT_TEXT


def _insert_in_order(messages: deque[MessageRecord], message: MessageRecord) -> None:
    """Slot a late arrival in by id: Discord ids grow with time, and the bot's own post is often
    recorded after messages that reached the gateway while its send request was in flight.
    """
    if len(messages) == messages.maxlen:
        messages.popleft()
    position = len(messages)
    while position > 0 and messages[position - 1].message_id > message.message_id:
        position -= 1
    messages.insert(position, message)


def redacted(
    history: list[ModelMessage],
    changes: Mapping[int, str | None],
    files_kept: Mapping[int, frozenset[str]] | None = None,
) -> list[ModelMessage]:
    """`history` with the quotes of edited messages updated and of deleted ones emptied (`quoting.requote`), and the
    files of deleted messages, or no longer on their message (`files_kept`), taken out.

    Prompts and tool results are rewritten; the model's own words are left as they were.
    """
    if not changes and not files_kept:
        return list(history)
    removals = Removals({message_id for message_id, text in changes.items() if text is None}, files_kept or {})
    return [
        _redacted(message, changes, removals) if isinstance(message, ModelRequest) else message for message in history
    ]


def _summarises(message: ModelMessage, message_id: int) -> bool:
    """Whether `message` is a summary (`context.summary_turn`) that may have been written from message `message_id`."""
    return any(
        isinstance(part, CompactionPart)
        and part.metadata is not None
        and part.metadata.get("first_id", 0) <= message_id <= part.metadata.get("last_id", 0)
        for part in message.parts
    )


def erased_history(history: list[ModelMessage], message_ids: Collection[int]) -> list[ModelMessage]:
    """`history` (a saved conversation's, say) as if the messages `message_ids` had been erased: their quotes
    emptied and naming no one, their files and the summaries written from them gone."""
    wanted = sorted(set(message_ids))
    kept = redacted(history, dict.fromkeys(wanted))
    kept = [message for message in kept if not _summarises_any(message, wanted)]
    return unattributed_history(kept, wanted)


def _summarises_any(message: ModelMessage, message_ids: list[int]) -> bool:
    """Whether `message` is a summary that may have been written from any of `message_ids` (sorted)."""
    for part in message.parts:
        if isinstance(part, CompactionPart) and part.metadata is not None:
            first = bisect.bisect_left(message_ids, part.metadata.get("first_id", 0))
            if first < len(message_ids) and message_ids[first] <= part.metadata.get("last_id", 0):
                return True
    return False


def unattributed_history(history: list[ModelMessage], message_ids: Collection[int]) -> list[ModelMessage]:
    """`history` with every quote of the messages `message_ids` no longer saying who wrote them."""
    return [
        replace(message, parts=[_unattributed_part(part, message_ids) for part in message.parts])
        if isinstance(message, ModelRequest)
        else message
        for message in history
    ]


def _unattributed_part(part: ModelRequestPart, message_ids: Collection[int]) -> ModelRequestPart:
    if isinstance(part, UserPromptPart | ToolReturnPart) and isinstance(part.content, str):
        content = unattributed(part.content, message_ids)
        if content != part.content:
            part = copy.copy(part)  # the old history may still be in use by a run that began before
            part.content = content
    elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
        items = [unattributed(item, message_ids) if isinstance(item, str) else item for item in part.content]
        if any(new != old for new, old in zip(items, part.content, strict=True)):
            part = copy.copy(part)
            part.content = items
    return part


def _redacted(request: ModelRequest, changes: Mapping[int, str | None], removals: Removals) -> ModelRequest:
    return replace(request, parts=[_redacted_part(part, changes, removals) for part in request.parts])


def _redacted_part(part: ModelRequestPart, changes: Mapping[int, str | None], removals: Removals) -> ModelRequestPart:
    if isinstance(part, UserPromptPart | ToolReturnPart) and isinstance(part.content, str):
        content = without_removed(requote(part.content, changes), removals)
        if content != part.content:
            # A copy: the old history may still be in use by a run that began before the change.
            part = copy.copy(part)
            part.content = content
    elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
        # A prompt with images: its text items hold the quotes, and the images are framed by their message.
        items = [
            without_removed(requote(item, changes), removals) if isinstance(item, str) else item
            for item in part.content
        ]
        items = images_without_removed(items, removals)
        if any(new != old for new, old in zip(items, part.content, strict=True)):
            part = copy.copy(part)
            part.content = items
    return part
