"""Which messages a catch-up covers: from a duration, a message link, or the member's own last message, to now."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from archive import ArchivedMessage, MessageLog
from archive.snowflakes import DISCORD_EPOCH_MS, SNOWFLAKE_TIMESTAMP_SHIFT

# The archive is read newest first in pages of this many messages.
PAGE = 500
# The most messages one catch-up reads: 10,000 is what a busy channel says in a long day.
MAX_MESSAGES = 20_000

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|mins|minutes?|h|hours?|d|days?|w|weeks?)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
# https://discord.com/developers/docs/reference#message-formatting: a message's link.
_LINK = re.compile(r"^\s*<?https://(?:\w+\.)?discord(?:app)?\.com/channels/(\d+|@me)/(\d+)/(\d+)>?\s*$")


class SinceError(ValueError):
    """`since` names no point a catch-up can start from; the message is the one line the member sees."""


@dataclass(frozen=True, slots=True)
class Since:
    """Where a catch-up starts: after a message id (0: the start of the archive); `own_last`: after the member's
    own latest message, found while reading."""

    after_id: int
    described: str
    own_last: bool = False


def parse_since(text: str | None, *, channel_id: int, now: datetime) -> Since:
    """`since` as a member typed it: empty (their own last message here), a duration (`3h`, `90m`, `2d`, `1w`) or a
    link to a message of this channel."""
    if text is None or not text.strip():
        return Since(0, "your last message here", own_last=True)
    duration = _DURATION.match(text)
    if duration is not None:
        seconds = float(duration.group(1)) * _UNIT_SECONDS[duration.group(2)[0].lower()]
        if not 0 < seconds <= 366 * 86400:
            raise SinceError("Give a duration between a minute and a year, like 3h or 2d.")
        return Since(id_at(now - timedelta(seconds=seconds)), f"the last {text.strip()}")
    link = _LINK.match(text)
    if link is not None:
        if int(link.group(2)) != channel_id:
            raise SinceError("That message is in another channel: use /parley catchup in the channel it is in.")
        return Since(int(link.group(3)), "that message")
    raise SinceError("`since` takes a duration (3h, 90m, 2d, 1w) or a link to a message of this channel.")


def id_at(moment: datetime) -> int:
    """The smallest Discord id made at `moment`: every message sent after it has a greater one."""
    milliseconds = max(0, int(moment.timestamp() * 1000) - DISCORD_EPOCH_MS)
    return milliseconds << SNOWFLAKE_TIMESTAMP_SHIFT


@dataclass(frozen=True, slots=True)
class Range:
    """The messages a catch-up covers, oldest first; `more`: older ones past MAX_MESSAGES were not read."""

    messages: list[ArchivedMessage]
    more: bool


async def read_range(
    archive: MessageLog,
    channel_id: int,
    since: Since,
    *,
    member_id: int,
    forgotten_after: int | None,
    before_id: int | None = None,
) -> Range:
    """The channel's archived messages after `since` (and after a forget marker) and before `before_id` (None: up to
    now), newest pages first, at most MAX_MESSAGES; with `since.own_last`, those after the member's own latest
    message."""
    floor = max(since.after_id, forgotten_after or 0)
    newest_first: list[ArchivedMessage] = []
    before = before_id
    while len(newest_first) < MAX_MESSAGES:
        page = await archive.recent(channel_id, limit=PAGE, before_id=before, after_id=floor)
        for message in reversed(page):
            if since.own_last and message.author_id == member_id:
                return Range(newest_first[::-1], more=False)
            newest_first.append(message)
        if len(page) < PAGE:
            return Range(newest_first[::-1], more=False)
        before = page[0].message_id
    return Range(newest_first[:MAX_MESSAGES][::-1], more=True)


def questions_for(member_id: int, messages: list[ArchivedMessage]) -> list[ArchivedMessage]:
    """The messages of the range that ask the member something: they @mention them or reply to them, and ask."""
    return [
        message
        for message in messages
        if message.author_id != member_id
        and (member_id in message.mention_ids or message.reply_to_author_id == member_id)
        and "?" in message.content
    ]
