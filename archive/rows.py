"""Row conversions both backends share: an archived message's columns, and the message a row of them makes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archive import ArchivedMessage
from archive.times import from_ms

MESSAGE_COLUMNS = (
    "message_id, guild_id, channel_id, author_id, author_name, content,"
    " created_at, edited_at, is_bot, reply_to_message_id,"
    " mention_ids, reply_to_author_id, mentions_everyone"
)


def message_from_row(row: Sequence[Any]) -> ArchivedMessage:
    (
        message_id, guild_id, channel_id, author_id, name, content, created, edited, is_bot, reply,
        mentions, reply_to_author_id, mentions_everyone,
    ) = row  # fmt: skip
    return ArchivedMessage(
        message_id=message_id,
        guild_id=guild_id,
        channel_id=channel_id,
        author_id=author_id,
        author_name=name,
        content=content,
        created_at=from_ms(created),
        is_bot=bool(is_bot),
        reply_to_message_id=reply,
        edited_at=None if edited is None else from_ms(edited),
        mention_ids=frozenset(map(int, mentions.split())),
        reply_to_author_id=reply_to_author_id,
        mentions_everyone=bool(mentions_everyone),
    )
