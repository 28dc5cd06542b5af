"""What of a channel's history reaches a member who may not read it (no Read Message History there).

Discord shows such a member the messages sent while they look at the channel, and nothing from before;
Parley cannot know what they saw. So the rule is the simplest safe one: the model answering them sees, of
everything before their question, only their own messages and Parley's replies to them. No other member's
message, no summary of an earlier conversation, and none of the conversation's model history (which quotes
the others) reaches that answer. Their question and its answer are then added to the conversation like any
turn: everyone else in it can read the channel, so nothing leaks the other way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pydantic_ai.messages import ModelMessage

from conversation import ChannelConversation
from prompting.context import split_turns
from records import MessageRecord


def visible_to(messages: Iterable[MessageRecord], asker_id: int, bot_user_id: int) -> list[MessageRecord]:
    """The messages a member without Read Message History may be shown: their own, and Parley's replies to them."""
    return [
        message
        for message in messages
        if message.author_id == asker_id
        or (message.author_id == bot_user_id and message.reply_to_author_id == asker_id)
    ]


def private_view(
    conversation: ChannelConversation, asker_id: int, bot_user_id: int, history: Sequence[ModelMessage] = ()
) -> ChannelConversation:
    """`conversation` as an answer to `asker_id`, who may not read the channel's history, may see it: the
    messages `visible_to` them, all of them quoted as unseen context, with `history` alone as the model
    history (Regenerate passes their own last turn). The conversation itself is not changed."""
    shown = visible_to(conversation.messages, asker_id, bot_user_id)
    return replace(
        conversation,
        messages=deque(shown, maxlen=conversation.messages.maxlen),
        llm_history=list(history),
        earlier_conversations="",
        # Nothing of it has been shown to this model history, and Parley's replies count as context.
        prompted_through=0,
        opened_after_id=max((message.message_id for message in shown), default=0),
        participants={message.author_id for message in shown},
        last_message_by_author={},
        bot_message_naming={},
        last_unnamed_bot_message=None,
        bot_namings={},
        latest_answer=None,
    )


def regenerated_view(
    conversation: ChannelConversation, asker_id: int, bot_user_id: int, reads_history: bool
) -> tuple[ChannelConversation, list[ModelMessage]]:
    """What Regenerate shows the model of `conversation`, and the history kept before the turn it rewrites.

    An asker who may not read the channel's history gets their own last turn alone as history (it was written
    from their private view), the turns before it kept as they were; anyone else the whole conversation, whose
    rewritten history then replaces it whole.
    """
    if reads_history:
        return conversation, []
    turns = split_turns(list(conversation.llm_history))
    earlier = [message for turn in turns[:-1] for message in turn]
    return private_view(conversation, asker_id, bot_user_id, turns[-1] if turns else []), earlier
