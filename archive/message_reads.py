"""The reads of the message archive both backends share: search, recent history, message ids and stats.

Each is written once, on the backend's `read` (SQLite-style placeholders, committed data only); what the two
databases do differently, their full-text query language and index, is data: the backend's `MessageDialect`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from archive import ArchivedAttachment, ArchivedMessage, ChannelStats, TopAuthor
from archive.members import NOT_WRITTEN_OPTED_OUT
from archive.rows import MESSAGE_COLUMNS, message_from_row
from archive.snowflakes import snowflake_ms
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

__all__ = ["MAX_ID", "MIN_MS", "MessageDialect", "MessageReads", "since_ms", "with_attachment"]

_MS_PER_HOUR = 3_600_000
# Open-ended time bounds, so a query without a window keeps the same SQL.
MIN_MS = -(2**63)
MAX_ID = 2**63 - 1  # the largest integer of either database
# https://discord.com/developers/docs/reference#snowflakes

# The stats queries read only the (channel_id, created_at, ...) index, apart from one row per top author for their
# name.
_WINDOW = "channel_id = :channel AND created_at >= :since"
_STATS_HOURS_SQL = f"SELECT (created_at / {_MS_PER_HOUR}) % 24, count(*) FROM messages WHERE {_WINDOW} GROUP BY 1"
# Two subqueries, so each of min() and max() is one index seek.
_STATS_SPAN_SQL = (
    f"SELECT (SELECT min(created_at) FROM messages WHERE {_WINDOW}),"
    f" (SELECT max(created_at) FROM messages WHERE {_WINDOW})"
)
# Counted by id so a renamed author counts once, under their latest name.
_STATS_AUTHORS_SQL = f"""
SELECT top.author_id, (SELECT author_name FROM messages
        WHERE channel_id = :channel AND author_id = top.author_id
        ORDER BY created_at DESC LIMIT 1) AS name, n
FROM (SELECT author_id, count(*) AS n FROM messages WHERE {_WINDOW}
      GROUP BY author_id ORDER BY n DESC, author_id LIMIT 5) AS top
ORDER BY n DESC, name
"""
# Ranking every match of a common word in a busy channel costs tens of milliseconds; ranking only the newest
# matches keeps search latency flat.
SEARCH_CANDIDATES = 400


@dataclass(frozen=True, slots=True)
class MessageDialect:
    """A backend's full-text search and id lists for the message reads.

    `match` turns free text into the backend's full-text query, its words joined by "AND" or "OR" (None without
    words); `channel_match` that query as the channel's own index takes it (None if no word can be in it). The
    search statements take :match (`channel_match`'s for messages, `match`'s for attachments), :channel, :since,
    :candidates and :limit; `search_all_sql` is the one without a time window (:since is `MIN_MS`).
    `attachments_sql` takes :ids, which `ids` makes of a list of message ids.
    """

    match: Callable[[str, str], str | None]
    channel_match: Callable[[int, str], str | None]
    search_all_sql: str
    search_window_sql: str
    search_attachments_sql: str
    attachments_sql: str
    ids: Callable[[Collection[int]], Any]


class MessageReads(BackendTables):
    """Search, recent history, message ids and stats of the `messages` table (the `MessageLog` reads)."""

    message_dialect: ClassVar[MessageDialect]

    def _memory_match(self, query: str, op: str) -> str | None:
        return self.message_dialect.match(query, op)

    async def search(
        self,
        channel_id: int,
        query: str,
        *,
        hours: float | None = None,
        limit: int = 20,
        now: datetime | None = None,
    ) -> list[ArchivedMessage]:
        """Full-text search in one channel's messages and their attachments' names and text, best match first,
        ties newest first.

        ``query`` is plain text, never the backend's query syntax: its words (common English stopwords aside)
        must all appear (AND); if that finds nothing, any of them may (OR). Only the newest 400 matches in the
        channel are ranked; messages found by their text and by their attachments take turns.
        """
        if limit <= 0:
            return []
        since = since_ms(hours, now)
        found: list[ArchivedMessage] = []
        for op in ("AND", "OR"):
            match = self.message_dialect.match(query, op)
            if match is None:
                return []
            found = await self._search_both(channel_id, match, since, limit)
            # Words are letters and digits, so a query of one word has no space: OR would find the same.
            if found or " " not in match:
                break
        return found

    async def _search_both(self, channel_id: int, match: str, since: int, limit: int) -> list[ArchivedMessage]:
        """Messages whose text matches, and messages whose attachments' names or text match, taking turns."""
        dialect = self.message_dialect
        params = {"channel": channel_id, "since": since, "candidates": SEARCH_CANDIDATES, "limit": limit}
        in_text: list[ArchivedMessage] = []
        channel_match = dialect.channel_match(channel_id, match)
        if channel_match is not None:
            sql = dialect.search_all_sql if since == MIN_MS else dialect.search_window_sql
            in_text = [message_from_row(row) for row in await self.read(sql, {**params, "match": channel_match})]
        rows = await self.read(dialect.search_attachments_sql, {**params, "match": match})
        in_files = [with_attachment(row) for row in rows]
        merged: dict[int, ArchivedMessage] = {}
        for pair in itertools.zip_longest(in_text, in_files):
            for message in pair:
                if message is not None:
                    known = merged.get(message.message_id)
                    merged[message.message_id] = message if known is None or message.attachments else known
        return list(merged.values())[:limit]

    async def recent(
        self,
        channel_id: int,
        *,
        limit: int = 50,
        hours: float | None = None,
        now: datetime | None = None,
        before_id: int | None = None,
        after_id: int = 0,
    ) -> list[ArchivedMessage]:
        """The latest ``limit`` messages of a channel, oldest first.

        ``hours`` keeps messages from the last hours before ``now``; ``before_id``
        keeps messages older than that message and ``after_id`` newer ones (Discord
        ids grow with time, and two messages can share a millisecond, so paging goes by id).
        """
        if limit <= 0:
            return []
        rows = await self.read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages AS m"
            " WHERE channel_id = ? AND created_at >= ? AND message_id < ? AND message_id > ?"
            f" AND {NOT_WRITTEN_OPTED_OUT} ORDER BY created_at DESC, message_id DESC LIMIT ?",
            (channel_id, since_ms(hours, now), MAX_ID if before_id is None else before_id, after_id, limit),
        )
        return await self._with_attachments([message_from_row(row) for row in reversed(rows)])

    async def _with_attachments(self, messages: list[ArchivedMessage]) -> list[ArchivedMessage]:
        """`messages` carrying what they shared (names, types, sizes, the text read from it)."""
        if not messages:
            return messages
        dialect = self.message_dialect
        rows = await self.read(dialect.attachments_sql, {"ids": dialect.ids([m.message_id for m in messages])})
        found: dict[int, list[ArchivedAttachment]] = {}
        for message_id, *fields in rows:
            found.setdefault(message_id, []).append(ArchivedAttachment(*fields))
        if not found:
            return messages
        return [replace(m, attachments=tuple(found[m.message_id])) if m.message_id in found else m for m in messages]

    async def newest_message_ids(self, channel_id: int, count: int, *, before_id: int = MAX_ID) -> list[int]:
        """The ids of the channel's newest ``count`` archived messages older than ``before_id``, newest first."""
        rows = await self.read(
            "SELECT message_id FROM messages WHERE channel_id = ? AND created_at <= ? AND message_id < ?"
            " ORDER BY created_at DESC, message_id DESC LIMIT ?",
            (channel_id, snowflake_ms(before_id), before_id, count),
        )
        return [int(message_id) for (message_id,) in rows]

    async def message_ids_between(self, channel_id: int, after_id: int, upto_id: int) -> set[int]:
        """The ids of the channel's archived messages with ``after_id < id <= upto_id`` (Discord snowflakes)."""
        # The time bounds, read off the ids, let the (channel_id, created_at) index do the work.
        rows = await self.read(
            "SELECT message_id FROM messages WHERE channel_id = ? AND created_at BETWEEN ? AND ?"
            " AND message_id > ? AND message_id <= ?",
            (channel_id, snowflake_ms(after_id), snowflake_ms(upto_id), after_id, upto_id),
        )
        return {int(message_id) for (message_id,) in rows}

    async def stats(self, channel_id: int, *, hours: float | None = None, now: datetime | None = None) -> ChannelStats:
        """Message count, top 5 authors, 3 busiest UTC hours and time span of a channel."""
        window = {"channel": channel_id, "since": since_ms(hours, now)}
        by_hour = await self.read(_STATS_HOURS_SQL, window)
        if not by_hour:
            return ChannelStats(0, [], [], None, None)
        ((first, last),) = await self.read(_STATS_SPAN_SQL, window)
        authors = await self.read(_STATS_AUTHORS_SQL, window)
        return ChannelStats(
            message_count=sum(n for _, n in by_hour),
            top_authors=[TopAuthor(author_id, name, n) for author_id, name, n in authors],
            busiest_hours=sorted(((int(hour), n) for hour, n in by_hour), key=lambda hour_n: (-hour_n[1], hour_n[0]))[
                :3
            ],
            first_at=from_ms(first),
            last_at=from_ms(last),
        )


def since_ms(hours: float | None, now: datetime | None) -> int:
    """The start of a window of the last `hours` before `now` (the present by default), in Unix milliseconds;
    `MIN_MS` without a window."""
    if hours is None:
        return MIN_MS
    try:
        return to_ms((now or datetime.now(UTC)) - timedelta(hours=hours))
    except OverflowError:
        # A window reaching past year 1 (a model asking for "everything").
        return MIN_MS


def with_attachment(row: Sequence[Any]) -> ArchivedMessage:
    """A message found by one of its attachments, carrying that attachment and the matching excerpt."""
    attachment_id, filename, content_type, size, excerpt = row[13:]
    found = ArchivedAttachment(attachment_id, filename, content_type, size, excerpt)
    return replace(message_from_row(row[:13]), attachments=(found,))
