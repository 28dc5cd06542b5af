"""A live conversation as a plain snapshot, so it outlasts the process: what the archive keeps between runs.

The snapshot is JSON of the engine state the decider needs (`ChannelConversation`'s fields) and the
model history, already redacted: an edited message is stored as it now reads, a deleted one not at all.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage

from conversation import ChannelConversation, redacted
from records import CHANNEL, CONVERSATION_KINDS, AnswerPosts, MessageRecord

__all__ = ["ConversationSnapshot", "restore", "snapshot"]


@dataclass
class ConversationSnapshot:
    """Every field of a `ChannelConversation`, in types JSON can carry."""

    channel_id: int
    started_at: datetime
    last_activity: datetime
    messages: list[MessageRecord]
    llm_history: list[ModelMessage] = field(default_factory=list)
    participants: list[int] = field(default_factory=list)
    last_message_by_author: dict[int, MessageRecord] = field(default_factory=dict)
    bot_turns: int = 0
    bot_message_naming: dict[int, MessageRecord] = field(default_factory=dict)
    last_unnamed_bot_message: MessageRecord | None = None
    opened_after_id: int = 0
    prompted_through: int = 0
    redactions: dict[int, str | None] = field(default_factory=dict)
    files_kept: dict[int, frozenset[str]] = field(default_factory=dict)
    earlier_conversations: str = ""
    kind: str = CHANNEL
    latest_answer: AnswerPosts | None = None
    # Absent from snapshots of earlier versions: the learned tier then counts from the bot's latest naming turn.
    bot_namings: dict[int, int] = field(default_factory=dict)


_SNAPSHOT = TypeAdapter(ConversationSnapshot)


def snapshot(conversation: ChannelConversation) -> str:
    """The conversation as JSON, with every edit and deletion it knows of applied to everything in it."""
    changes = conversation.redactions

    def current(message: MessageRecord) -> MessageRecord:
        # The decider's indexes may still hold a message as it was first seen; only its ids matter to them.
        if message.message_id not in changes:
            return message
        return replace(message, content=changes[message.message_id] or "")

    state = ConversationSnapshot(
        channel_id=conversation.channel_id,
        started_at=conversation.started_at,
        last_activity=conversation.last_activity,
        messages=list(conversation.messages),
        llm_history=redacted(conversation.llm_history, changes, conversation.files_kept),
        participants=sorted(conversation.participants),
        last_message_by_author={k: current(m) for k, m in conversation.last_message_by_author.items()},
        bot_turns=conversation.bot_turns,
        bot_message_naming={k: current(m) for k, m in conversation.bot_message_naming.items()},
        last_unnamed_bot_message=(
            None if conversation.last_unnamed_bot_message is None else current(conversation.last_unnamed_bot_message)
        ),
        opened_after_id=conversation.opened_after_id,
        prompted_through=conversation.prompted_through,
        # A deletion is kept as such (None); an edit's text is already in the messages and history.
        redactions=dict(changes),
        files_kept=dict(conversation.files_kept),
        earlier_conversations=conversation.earlier_conversations,
        kind=conversation.kind,
        latest_answer=conversation.latest_answer,
        bot_namings=dict(conversation.bot_namings),
    )
    return _SNAPSHOT.dump_json(state).decode()


def restore(data: str | bytes) -> ChannelConversation:
    """The conversation a `snapshot` was taken of (its messages in a plain deque: the manager bounds it on adoption).

    Raises:
        pydantic.ValidationError: `data` is not a snapshot this version can read.
    """
    state = _SNAPSHOT.validate_json(data)
    return ChannelConversation(
        channel_id=state.channel_id,
        started_at=state.started_at,
        last_activity=state.last_activity,
        messages=deque(state.messages),
        llm_history=state.llm_history,
        participants=set(state.participants),
        last_message_by_author=state.last_message_by_author,
        bot_turns=state.bot_turns,
        bot_message_naming=state.bot_message_naming,
        last_unnamed_bot_message=state.last_unnamed_bot_message,
        opened_after_id=state.opened_after_id,
        prompted_through=state.prompted_through,
        redactions=state.redactions,
        files_kept=state.files_kept,
        earlier_conversations=state.earlier_conversations,
        kind=state.kind if state.kind in CONVERSATION_KINDS else CHANNEL,
        latest_answer=state.latest_answer,
        bot_namings=state.bot_namings,
    )
