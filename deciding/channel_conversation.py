"""A channel's live conversation (`ChannelConversation`): everything said while it is active, and the model history
it keeps, edits and deletions applied to it; and the engine's clock. conversation.py keeps the conversations.

Nothing here knows about Discord; time comes from an injected clock.
"""

from __future__ import annotations

import bisect
import copy
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ToolReturnPart,
    UserPromptPart,
)

from files.history import Removals, images_without_removed, kept_files, without_removed
from prompting.quoting import requote, unattributed
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
    # Summaries of the channel's earlier conversations, quoted (`prompting.context.render_earlier_conversations`),
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
            insert_in_order(self.messages, replace(found, attachments=attachments))
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
                insert_in_order(self.messages, replace(found, content=content))
        self.redactions[message_id] = content
        history = redacted(self.llm_history, {message_id: content})
        if content is None:
            # A summary written from the deleted message may repeat it: the turns it stood for are gone with it.
            history = [message for message in history if not _summarises(message, message_id)]
        self.llm_history = history
        return True


def _is_placeholder(message: MessageRecord) -> bool:
    return message.author == OPTED_OUT_AUTHOR and message.content == OPTED_OUT_TEXT


def insert_in_order(messages: deque[MessageRecord], message: MessageRecord) -> None:
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
    """`history` with the quotes of edited messages updated and of deleted ones emptied (`prompting.quoting.requote`),
    and the files of deleted messages, or no longer on their message (`files_kept`), taken out.

    Prompts and tool results are rewritten; the model's own words are left as they were.
    """
    if not changes and not files_kept:
        return list(history)
    removals = Removals({message_id for message_id, text in changes.items() if text is None}, files_kept or {})
    return [
        _redacted(message, changes, removals) if isinstance(message, ModelRequest) else message for message in history
    ]


def _summarises(message: ModelMessage, message_id: int) -> bool:
    """Whether `message` is a summary (`prompting.context.summary_turn`) that may have been written from message
    `message_id`."""
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
