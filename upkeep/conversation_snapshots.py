"""A live conversation as a plain snapshot, so it outlasts the process: what the archive keeps between runs.

The snapshot is JSON of the engine state the decider needs (`ChannelConversation`'s fields) and the
model history, already redacted: an edited message is stored as it now reads, a deleted one not at all.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import TypeAdapter

from conversation import ChannelConversation, redacted
from records import CHANNEL, CONVERSATION_KINDS, MessageRecord

__all__ = ["restore", "snapshot"]


# A snapshot is the conversation's own fields: pydantic carries its deque and set as JSON arrays, and the fields
# an earlier version did not have take their defaults when it is read back.
_SNAPSHOT = TypeAdapter(ChannelConversation)


def snapshot(conversation: ChannelConversation) -> str:
    """The conversation as JSON, with every edit and deletion it knows of applied to everything in it."""
    changes = conversation.redactions

    def current(message: MessageRecord) -> MessageRecord:
        # The decider's indexes may still hold a message as it was first seen; only its ids matter to them.
        if message.message_id not in changes:
            return message
        return replace(message, content=changes[message.message_id] or "")

    # Redactions travel as they are: a deletion is kept as such (None); an edit's text is already in the messages
    # and history.
    state = replace(
        conversation,
        llm_history=redacted(conversation.llm_history, changes, conversation.files_kept),
        last_message_by_author={k: current(m) for k, m in conversation.last_message_by_author.items()},
        bot_message_naming={k: current(m) for k, m in conversation.bot_message_naming.items()},
        last_unnamed_bot_message=(
            None if conversation.last_unnamed_bot_message is None else current(conversation.last_unnamed_bot_message)
        ),
    )
    return _SNAPSHOT.dump_json(state).decode()


def restore(data: str | bytes) -> ChannelConversation:
    """The conversation a `snapshot` was taken of (its messages in a plain deque: the manager bounds it on adoption).

    Raises:
        pydantic.ValidationError: `data` is not a snapshot this version can read.
    """
    conversation = _SNAPSHOT.validate_json(data)
    if conversation.kind not in CONVERSATION_KINDS:
        conversation.kind = CHANNEL
    return conversation
