"""How chat data is quoted to the model: the framing tags, and the attributes that say who wrote a message.

Everything a member can choose (server, channel and thread names, display names, message text) reaches
the model only inside these frames: names as HTML-escaped attributes, text as a body whose framing tags
pydantic-ai neutralises. A display name proves nothing, since anyone can take the bot's; who wrote a
message is told by `author_id`, and the bot's own messages by `by_ai`, which only Parley sets, from its
user id.
"""

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from pydantic_ai.framing import close_tag, open_tag, register_tag, wrap

from archive import ArchivedMessage, ChannelStats
from archive.knowledge_types import KnowledgeHit

__all__ = [
    "AI_PARTICIPANT_TAG",
    "AI_TURN_TAG",
    "ARCHIVED_MESSAGES_TAG",
    "ARCHIVED_MESSAGE_TAG",
    "ASKED_ABOUT_TAG",
    "CHANNEL_INFO_TAG",
    "CHANNEL_LOG_TAG",
    "CHANNEL_STATS_TAG",
    "EARLIER_CONVERSATIONS_TAG",
    "EARLIER_CONVERSATION_TAG",
    "KNOWLEDGE_RESULTS_TAG",
    "KNOWLEDGE_SECTION_TAG",
    "LAST_ANSWERED_TAG",
    "LINKED_PAGE_TAG",
    "MEMORIES_TAG",
    "MEMORY_TAG",
    "MESSAGE_TAG",
    "NEW_MESSAGE_TAG",
    "REPORTED_MESSAGE_TAG",
    "REPORT_REASON_TAG",
    "SCHEDULED_PROMPT_TAG",
    "SERVER_RULES_TAG",
    "SUMMARY_SO_FAR_TAG",
    "TOOL_RESULT_TAG",
    "TOP_AUTHOR_TAG",
    "TRANSCRIPT_TAG",
    "WEB_RESULTS_TAG",
    "WEB_RESULT_TAG",
    "author_attributes",
    "format_knowledge",
    "format_log",
    "format_messages",
    "format_stats",
    "inline",
]

# Registered at import time so every process escapes these tags the same way (see `register_tag`), and
# so that a message body can open or close none of them.
TRANSCRIPT_TAG = register_tag("chat_transcript")
MESSAGE_TAG = register_tag("chat_message")
NEW_MESSAGE_TAG = register_tag("new_message")
# The message a member asks Parley about ("Ask Parley" on a message).
ASKED_ABOUT_TAG = register_tag("asked_about")
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
# A page a member linked, read by Parley (tools.read_link): whoever wrote the page, its text is data.
LINKED_PAGE_TAG = register_tag("linked_page")
# A channel's messages as numbered lines, for a catch-up: a tenth of `archived_message`'s cost per message.
CHANNEL_LOG_TAG = register_tag("channel_log")
WEB_RESULT_TAG = register_tag("web_result")
# The knowledge base's search results (tools.search_knowledge): documents admins added and members' pinned messages.
KNOWLEDGE_RESULTS_TAG = register_tag("knowledge_results")
KNOWLEDGE_SECTION_TAG = register_tag("knowledge_section")
# A message reported to the moderators (or flagged by a watch list), the server's rules and the reporter's reason
# (moderation/reading.py): all written by members.
REPORTED_MESSAGE_TAG = register_tag("reported_message")
SERVER_RULES_TAG = register_tag("server_rules")
REPORT_REASON_TAG = register_tag("report_reason")
# What a server's admins scheduled Parley to answer at set times (`/parley-admin schedule`).
SCHEDULED_PROMPT_TAG = register_tag("scheduled_prompt")
# A section's heading path is a few headings deep; past this it is cut.
HEADING_MAX_CHARS = 300

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
QUOTE_MAX_CHARS: dict[str, int] = {
    MESSAGE_TAG: 600,
    NEW_MESSAGE_TAG: 4000,
    ASKED_ABOUT_TAG: 4000,
    ARCHIVED_MESSAGE_TAG: 500,
}
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


# The attributes of a quoted message's frame that say who wrote it (`author_attributes`).
_AUTHOR_ATTRIBUTES = re.compile(r'\s(?:author|author_id)="[^"]*"')
_AUTHOR_ID = re.compile(r'\sauthor_id="(\d+)"')


def unattributed(text: str, message_ids: Collection[int]) -> str:
    """`text` with every quote of the messages `message_ids` no longer saying who wrote them (their author's data
    was erased)."""
    if not message_ids or "message_id=" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        if int(match["id"]) not in message_ids:
            return match[0]
        return _AUTHOR_ATTRIBUTES.sub("", match["open"]) + match["body"] + match["close"]

    return _QUOTED_MESSAGE.sub(replace, text)


def authored_ids(text: str, author_id: int) -> set[int]:
    """The ids of the messages quoted in `text` as written by `author_id`."""
    if "message_id=" not in text:
        return set()
    return {
        int(match["id"])
        for match in _QUOTED_MESSAGE.finditer(text)
        if (author := _AUTHOR_ID.search(match["open"])) is not None and int(author[1]) == author_id
    }


def _neutralised(tag_name: str, body: str) -> str:
    """`body` as `wrap` puts it inside a frame: its framing tags escaped."""
    framed = wrap(_TAGS_BY_NAME[tag_name], body)
    return framed[framed.index(">") + 1 : framed.rindex("<")]


_TAGS_BY_NAME = {str(tag): tag for tag in (MESSAGE_TAG, NEW_MESSAGE_TAG, ASKED_ABOUT_TAG, ARCHIVED_MESSAGE_TAG)}


# --- Archived messages and channel stats, as tool results ---------------------------------------

# One long message shouldn't crowd every other line out of a tool result.
_MAX_LINE_TEXT = 500


def format_messages(
    messages: Sequence[ArchivedMessage],
    *,
    bot_user_id: int | None = None,
    max_chars: int = 6000,
    keep_newest: bool = False,
) -> str:
    """Render messages as quoted data for the model: an `<archived_messages>` of `<archived_message>` elements.

    Each element carries the author's name and id, the bot markers (`by_ai` for `bot_user_id`'s own
    messages, `bot` for other bots) and the UTC time as escaped attributes; its body is the text, with
    newlines made spaces, at most 500 characters, and unable to open or close a framing tag. The whole
    is at most about ``max_chars``. Messages keep the given order; those that don't fit are left out and
    counted in an ``omitted_later`` attribute, or, with ``keep_newest`` (for oldest-first lists), the
    oldest ones in ``omitted_earlier``.
    """
    if not messages:
        return "(no messages)"
    elements = [_format_line(message, bot_user_id) for message in messages]
    # No frame is longer than the one counting every message as both shown and left out.
    widest_frame = _archived_messages_open(len(elements), len(elements), keep_newest) + close_tag(ARCHIVED_MESSAGES_TAG)
    budget = max_chars - len(widest_frame) - 1  # the newline before the closing tag
    candidates = reversed(elements) if keep_newest else elements
    shown = 0
    used = 0
    for element in candidates:
        used += len(element) + 1
        if used > budget:
            break
        shown += 1
    kept = elements[len(elements) - shown :] if keep_newest else elements[:shown]
    opening = _archived_messages_open(shown, len(elements) - shown, keep_newest)
    return "\n".join([opening, *kept, close_tag(ARCHIVED_MESSAGES_TAG)])


def _archived_messages_open(shown: int, omitted: int, keep_newest: bool) -> str:
    where = "omitted_earlier" if keep_newest else "omitted_later"
    return open_tag(ARCHIVED_MESSAGES_TAG, shown=str(shown), **{where: str(omitted) if omitted else None})


def _format_line(message: ArchivedMessage, bot_user_id: int | None) -> str:
    text = " ".join(message.content.split())
    if len(text) > _MAX_LINE_TEXT:
        text = text[: _MAX_LINE_TEXT - 1] + "…"
    for attachment in message.attachments:
        excerpt = " ".join(attachment.text.split())[:_MAX_LINE_TEXT]
        text += f" [attached {' '.join(attachment.filename.split())}" + (f": {excerpt}]" if excerpt else "]")
    return wrap(
        ARCHIVED_MESSAGE_TAG,
        text,
        **author_attributes(message.author_name, message.author_id, is_bot=message.is_bot, bot_user_id=bot_user_id),
        time_utc=f"{message.created_at:%Y-%m-%d %H:%M}",
        message_id=str(message.message_id),
    )


def format_log(messages: Sequence[ArchivedMessage], *, line_chars: int) -> str:
    """Render messages as quoted data in one `<channel_log>`: a line each, `[n] name: text`, numbered from 1.

    Each text has its newlines made spaces (so no message can start a line of its own) and is cut at `line_chars`;
    a shared file is named after it. Who wrote what is only as good as a display name: a catch-up needs no more.
    """
    lines = []
    for number, message in enumerate(messages, start=1):
        text = log_line_text(message, line_chars)
        name = " ".join(message.author_name.split()) + (" (bot)" if message.is_bot else "")
        lines.append(f"[{number}] {name}: {text}")
    # Each line on a line of its own, the frame's tags included, so a line's number always starts it.
    return wrap(CHANNEL_LOG_TAG, "\n" + "\n".join(lines) + "\n")


def log_line_text(message: ArchivedMessage, line_chars: int) -> str:
    """A message's text on one line, at most `line_chars`, with the names of its files."""
    text = " ".join(message.content.split())
    files = "".join(f" [file {' '.join(attachment.filename.split())}]" for attachment in message.attachments)
    text += files
    return text if len(text) <= line_chars else text[: line_chars - 1] + "…"


def format_stats(stats: ChannelStats, *, bot_user_id: int | None = None) -> str:
    """Render channel stats as quoted data: a `<channel_stats>` with a `<top_author>` per top author."""
    if stats.first_at is None or stats.last_at is None:
        return "No messages in this period."
    busiest = ", ".join(f"{hour:02d}:00 ({n})" for hour, n in stats.busiest_hours)
    lines = [
        open_tag(
            CHANNEL_STATS_TAG,
            message_count=str(stats.message_count),
            first_utc=f"{stats.first_at:%Y-%m-%d %H:%M}",
            last_utc=f"{stats.last_at:%Y-%m-%d %H:%M}",
            busiest_hours_utc=busiest,
        )
    ]
    lines += [
        wrap(
            TOP_AUTHOR_TAG,
            "",
            **author_attributes(author.name, author.author_id, is_bot=False, bot_user_id=bot_user_id),
            messages=str(author.messages),
        )
        for author in stats.top_authors
    ]
    lines.append(close_tag(CHANNEL_STATS_TAG))
    return "\n".join(lines)


def format_knowledge(hits: Sequence[KnowledgeHit]) -> str:
    """Knowledge base sections as quoted data for the model: a `<knowledge_results>` of `<knowledge_section>`
    elements, best first, each naming its document (title and id), its section's heading path and, for a channel's
    document (a pinned message), the channel; the body is the quote."""
    if not hits:
        return "No section of the server's documents matches."
    elements = [
        wrap(
            KNOWLEDGE_SECTION_TAG,
            hit.quote,
            document=inline(hit.title),
            section=" ".join(hit.heading.split())[:HEADING_MAX_CHARS] or None,
            document_id=str(hit.document_id),
            channel_id=None if hit.channel_id is None else str(hit.channel_id),
        )
        for hit in hits
    ]
    return "\n".join(
        [open_tag(KNOWLEDGE_RESULTS_TAG, count=str(len(elements))), *elements, close_tag(KNOWLEDGE_RESULTS_TAG)]
    )
