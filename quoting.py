"""How chat data is quoted to the model: the framing tags, and the attributes that say who wrote a message.

Everything a member can choose (server, channel and thread names, display names, message text) reaches
the model only inside these frames: names as HTML-escaped attributes, text as a body whose framing tags
pydantic-ai neutralises. A display name proves nothing, since anyone can take the bot's; who wrote a
message is told by `author_id`, and the bot's own messages by `by_ai`, which only Parley sets, from its
user id.
"""

import re
from collections.abc import Mapping
from typing import Final

from pydantic_ai.framing import register_tag, wrap

__all__ = [
    "AI_PARTICIPANT_TAG",
    "AI_TURN_TAG",
    "ARCHIVED_MESSAGES_TAG",
    "ARCHIVED_MESSAGE_TAG",
    "CHANNEL_INFO_TAG",
    "CHANNEL_STATS_TAG",
    "EARLIER_CONVERSATIONS_TAG",
    "EARLIER_CONVERSATION_TAG",
    "LAST_ANSWERED_TAG",
    "MEMORIES_TAG",
    "MEMORY_TAG",
    "MESSAGE_TAG",
    "NEW_MESSAGE_TAG",
    "SUMMARY_SO_FAR_TAG",
    "TOOL_RESULT_TAG",
    "TOP_AUTHOR_TAG",
    "TRANSCRIPT_TAG",
    "WEB_RESULTS_TAG",
    "WEB_RESULT_TAG",
    "author_attributes",
    "inline",
]

# Registered at import time so every process escapes these tags the same way (see `register_tag`), and
# so that a message body can open or close none of them.
TRANSCRIPT_TAG = register_tag("chat_transcript")
MESSAGE_TAG = register_tag("chat_message")
NEW_MESSAGE_TAG = register_tag("new_message")
CHANNEL_INFO_TAG = register_tag("channel_info")
ARCHIVED_MESSAGES_TAG = register_tag("archived_messages")
ARCHIVED_MESSAGE_TAG = register_tag("archived_message")
CHANNEL_STATS_TAG = register_tag("channel_stats")
TOP_AUTHOR_TAG = register_tag("top_author")
AI_PARTICIPANT_TAG = register_tag("ai_participant")
LAST_ANSWERED_TAG = register_tag("last_answered")
MEMORIES_TAG = register_tag("memories")
MEMORY_TAG = register_tag("memory")
EARLIER_CONVERSATION_TAG = register_tag("earlier_conversation")
SUMMARY_SO_FAR_TAG = register_tag("summary_so_far")
EARLIER_CONVERSATIONS_TAG = register_tag("earlier_conversations")
AI_TURN_TAG = register_tag("ai_turn")
# What outside tools return: an MCP server's result (in pydantic-ai's own data tag, which `wrap` takes as it is),
# and web search results, whoever wrote those pages.
TOOL_RESULT_TAG: Final = "tool_result"
WEB_RESULTS_TAG = register_tag("web_results")
WEB_RESULT_TAG = register_tag("web_result")

# Discord caps names at 100 characters; anything longer did not come from Discord.
NAME_MAX_CHARS = 100


def inline(name: str) -> str:
    """A Discord name (member, channel, thread, server) as one capped line, for an attribute value."""
    return " ".join(name.split())[:NAME_MAX_CHARS]


def author_attributes(name: str, author_id: int, *, is_bot: bool, bot_user_id: int | None) -> dict[str, str | None]:
    """The attributes naming a message's author: name, id, and whether the bot itself or another bot wrote it.

    `by_ai` comes from the author's id alone, never the name, so a member nicknamed like the bot is still
    a member. Without `bot_user_id` (a replay that doesn't know it) no message is marked as the bot's.
    """
    own = bot_user_id is not None and author_id == bot_user_id
    return {
        "author": inline(name),
        "author_id": str(author_id),
        "by_ai": "true" if own else None,
        "bot": "true" if is_bot and not own else None,
    }


# Longest body each quoted message frame holds, by tag name: a message edited after it was quoted is
# re-capped the same way (`requote`).
QUOTE_MAX_CHARS: dict[str, int] = {MESSAGE_TAG: 600, NEW_MESSAGE_TAG: 4000, ARCHIVED_MESSAGE_TAG: 500}
DELETED_BODY = "(message deleted)"
# One quoted message: its opening tag carries message_id; its body can't hold its closing tag (`wrap`
# neutralises it) and attribute values can't hold ">" (they are HTML-escaped).
_QUOTED_MESSAGE = re.compile(
    r'(?P<open><(?P<tag>{tags})\b[^>]*\bmessage_id="(?P<id>\d+)"[^>]*>)(?P<body>.*?)(?P<close></(?P=tag)>)'.format(
        tags="|".join(QUOTE_MAX_CHARS)
    ),
    re.DOTALL,
)


def cap_text(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars`, saying how much was cut."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f" [… {len(text) - max_chars} more characters cut]"


def requote(text: str, changes: Mapping[int, str | None]) -> str:
    """`text` with the body of every quoted message in `changes` replaced: by its new text, or, for None, deleted.

    What the model was shown earlier in a conversation stays true to the channel: an edited message reads
    as it now stands, and a deleted one's text is gone from the history sent with every later request.
    """
    if not changes or "message_id=" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        message_id = int(match["id"])
        if message_id not in changes:
            return match[0]
        new_text = changes[message_id]
        tag = match["tag"]
        body = DELETED_BODY if new_text is None else _neutralised(tag, cap_text(new_text, QUOTE_MAX_CHARS[tag]))
        return match["open"] + body + match["close"]

    return _QUOTED_MESSAGE.sub(replace, text)


def _neutralised(tag_name: str, body: str) -> str:
    """`body` as `wrap` puts it inside a frame: its framing tags escaped."""
    framed = wrap(_TAGS_BY_NAME[tag_name], body)
    return framed[framed.index(">") + 1 : framed.rindex("<")]


_TAGS_BY_NAME = {str(tag): tag for tag in (MESSAGE_TAG, NEW_MESSAGE_TAG, ARCHIVED_MESSAGE_TAG)}
