"""What the archive holds by or about one member in one server, read for an export and deleted for an erasure; and
the members who opted out (upkeep/privacy.py and admission/optout.py have the rules).

The SQL is written once here, in the SQLite dialect both backends take (as in stores.py). A member's messages are
found through the server's channels and the (channel, time) index, which carries the author: an export or an
erasure is rare, and an index on the author would cost every archived message a write.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from archive import (
    ArchivedAttachment,
    ArchivedMessage,
    ArchiveWriteFailed,
    Feedback,
    MemberCounts,
    Memory,
    TokenUsage,
    Write,
)
from archive.member_models import FORGET_MODEL_CHOICE
from archive.rows import MESSAGE_COLUMNS, message_from_row
from archive.stores import MEMORY_COLUMNS, memories_from_rows
from archive.support_feedback import FEEDBACK_COLUMNS, feedback_of
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

# Messages read (or deleted) per statement: below either backend's limit on a statement's parameters.
MESSAGES_AT_ONCE = 500
_EPOCH_DAY = date(1970, 1, 1)

# A member's messages in a server: through the server's channels, so each channel's index does the work.
_MEMBER_MESSAGES = (
    "FROM messages WHERE channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?1)"
    " AND guild_id = ?1 AND author_id = ?2"
)
# The message `m` is not by a member who opted out in its server: no search matches what they wrote, not even as
# a placeholder (that would tell the searcher the words were said). The opt-out's key makes it one index seek.
NOT_OPTED_OUT = "NOT EXISTS (SELECT 1 FROM opt_outs AS o WHERE o.guild_id = m.guild_id AND o.member_id = m.author_id)"
# Nor written after its author opted out in its server: such a message is never archived (admission/optout.py), and
# should a path archive one, no read of the channel's messages returns it.
NOT_WRITTEN_OPTED_OUT = (
    "NOT EXISTS (SELECT 1 FROM opt_outs AS o WHERE o.guild_id = m.guild_id AND o.member_id = m.author_id"
    " AND o.opted_out_at <= m.created_at)"
)
_USAGE_COLUMNS = (
    "day, guild_id, channel_id, member_id, input_tokens, output_tokens, answers, cached_input_tokens, judge_calls,"
    " model, images"
)
# The summaries written from a conversation with any of them: found through their archived messages, and through the
# decisions on their questions asked by command (no archived message).
_SUMMARIES_ASKING = (
    "EXISTS (SELECT 1 FROM decisions AS d WHERE d.channel_id = s.channel_id AND d.author_id = ?2"
    " AND d.message_id BETWEEN s.first_id AND s.last_id"
    " AND d.channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?1))"
)
_SUMMARIES_QUOTING = (
    "FROM conversation_summaries AS s WHERE EXISTS (SELECT 1 FROM messages AS m"
    " WHERE m.channel_id = s.channel_id AND m.guild_id = ?1 AND m.author_id = ?2"
    f" AND m.message_id BETWEEN s.first_id AND s.last_id) OR {_SUMMARIES_ASKING}"
)

# The decisions quoting the member's messages, their questions asked by command (/ask) among them, and the summaries
# written from a conversation with such a question: no archived message leads to those.
_ERASE_DECISIONS = Write(
    "erase_decisions",
    (
        f"DELETE FROM conversation_summaries WHERE id IN (SELECT s.id FROM conversation_summaries AS s WHERE"
        f" {_SUMMARIES_ASKING})",
        "DELETE FROM decisions WHERE channel_id IN (SELECT channel_id FROM channels WHERE guild_id = ?1)"
        " AND author_id = ?2",
        "DELETE FROM support_handoffs WHERE guild_id = ?1 AND asker_id = ?2",
    ),
)
# Their feedback on the support answers to their questions (archive/support_feedback.py).
_ERASE_FEEDBACK = Write("erase_feedback", ("DELETE FROM support_feedback WHERE guild_id = ? AND asker_id = ?",))
_OPT_OUT = Write(
    "opt_out",
    (
        "INSERT INTO opt_outs (guild_id, member_id, opted_out_at) VALUES (?, ?, ?)"
        " ON CONFLICT (guild_id, member_id) DO NOTHING",
    ),
)
_OPT_IN = Write("opt_in", ("DELETE FROM opt_outs WHERE guild_id = ? AND member_id = ?",))
# Erasing again moves the erasure on; it never moves back.
_ERASED = Write(
    "erased",
    (
        "INSERT INTO erasures (guild_id, member_id, upto_id, erased_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (guild_id, member_id) DO UPDATE SET upto_id = excluded.upto_id, erased_at = excluded.erased_at"
        " WHERE excluded.upto_id > erasures.upto_id",
    ),
)


def withheld(guild: str, author: str, message: str) -> str:
    """SQL that holds when a message (its server, author and id as column expressions) may not be stored: its author
    opted out in the server, or erased their data there after writing it.

    Every write of a message's text (adding it, an edit, its files and the text read from them) is made on this
    condition, on both backends, whichever path it comes from: the one place opt-outs and erasures are kept to.
    """
    return (
        f"(EXISTS (SELECT 1 FROM opt_outs WHERE opt_outs.guild_id = {guild} AND opt_outs.member_id = {author})"
        f" OR EXISTS (SELECT 1 FROM erasures WHERE erasures.guild_id = {guild} AND erasures.member_id = {author}"
        f" AND {message} <= erasures.upto_id))"
    )


# The member's tokens join the server's unattributed row (member 0) of the same day, channel and model, so the
# server's totals (and its budget for the day) stay as they were.
_ANONYMISE_USAGE = Write(
    "anonymise_usage",
    (
        "INSERT INTO token_usage (day, guild_id, channel_id, member_id, model, input_tokens, cached_input_tokens,"
        " output_tokens, answers, judge_calls)"
        " SELECT day, guild_id, channel_id, 0, model, input_tokens, cached_input_tokens, output_tokens, answers,"
        " judge_calls FROM token_usage WHERE guild_id = ?1 AND member_id = ?2"
        " ON CONFLICT (day, guild_id, channel_id, member_id, model) DO UPDATE SET"
        " input_tokens = token_usage.input_tokens + excluded.input_tokens,"
        " cached_input_tokens = token_usage.cached_input_tokens + excluded.cached_input_tokens,"
        " output_tokens = token_usage.output_tokens + excluded.output_tokens,"
        " answers = token_usage.answers + excluded.answers,"
        " judge_calls = token_usage.judge_calls + excluded.judge_calls",
        "DELETE FROM token_usage WHERE guild_id = ?1 AND member_id = ?2",
    ),
)


class MemberTables(BackendTables):
    """Named reads and writes of one member's data in one server, on a backend's queue and read connection."""

    @abstractmethod
    def delete(self, message_ids: Iterable[int]) -> None: ...

    @abstractmethod
    async def forget_memories(self, memory_ids: Sequence[int]) -> None: ...

    # -- Opting out --

    async def set_opted_out(
        self, guild_id: int, member_id: int, opted_out: bool, *, now: datetime | None = None
    ) -> None:
        """Store whether the member opted out in the server; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored choice is unchanged.
        """
        if opted_out:
            self._enqueue(_OPT_OUT, (guild_id, member_id, to_ms(now or datetime.now(UTC))))
        else:
            self._enqueue(_OPT_IN, (guild_id, member_id))
        await self.flush()
        if ((guild_id, member_id) in await self.opt_outs(member_id)) != opted_out:
            raise ArchiveWriteFailed(f"the opt-out of member {member_id} could not be stored")

    async def opt_outs(self, member_id: int | None = None) -> dict[tuple[int, int], datetime]:
        """Since when each member opted out, by (server, member): everyone's, or one member's in every server."""
        sql = "SELECT guild_id, member_id, opted_out_at FROM opt_outs"
        rows = await (self.read(sql) if member_id is None else self.read(f"{sql} WHERE member_id = ?", (member_id,)))
        return {(int(guild_id), int(member)): from_ms(since) for guild_id, member, since in rows}

    # -- Erasures --

    async def mark_erased(self, guild_id: int, member_id: int, upto_id: int, *, now: datetime | None = None) -> None:
        """Keep that the member erased what they wrote in the server up to message id `upto_id`, so that no path
        stores it again; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why); nothing is kept from being stored.
        """
        self._enqueue(_ERASED, (guild_id, member_id, upto_id, to_ms(now or datetime.now(UTC))))
        await self.flush()
        if (await self.erasures(member_id)).get((guild_id, member_id), 0) < upto_id:
            raise ArchiveWriteFailed(f"the erasure of member {member_id} could not be kept")

    async def erasures(self, member_id: int | None = None) -> dict[tuple[int, int], int]:
        """Up to which message id each member erased what they wrote, by (server, member): everyone's, or one
        member's in every server."""
        sql = "SELECT guild_id, member_id, upto_id FROM erasures"
        rows = await (self.read(sql) if member_id is None else self.read(f"{sql} WHERE member_id = ?", (member_id,)))
        return {(int(guild_id), int(member)): int(upto_id) for guild_id, member, upto_id in rows}

    # -- What is kept of a member --

    async def member_message_ids(self, guild_id: int, member_id: int) -> dict[int, list[int]]:
        """The ids of the member's archived messages in the server, oldest first, by channel."""
        rows = await self.read(
            f"SELECT channel_id, message_id {_MEMBER_MESSAGES} ORDER BY message_id", (guild_id, member_id)
        )
        found: dict[int, list[int]] = {}
        for channel_id, message_id in rows:
            found.setdefault(int(channel_id), []).append(int(message_id))
        return found

    async def messages_by_id(self, message_ids: Sequence[int]) -> list[ArchivedMessage]:
        """These archived messages (at most MESSAGES_AT_ONCE), in id order, with their files and the text read
        from them."""
        if not message_ids:
            return []
        marks = ", ".join("?" * len(message_ids))
        rows = await self.read(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id IN ({marks}) ORDER BY message_id",
            list(message_ids),
        )
        files = await self.read(
            "SELECT message_id, attachment_id, filename, content_type, size, text FROM attachments"
            f" WHERE message_id IN ({marks}) ORDER BY attachment_id",
            list(message_ids),
        )
        shared: dict[int, list[ArchivedAttachment]] = {}
        for message_id, *fields in files:
            shared.setdefault(int(message_id), []).append(ArchivedAttachment(*fields))
        messages = [message_from_row(row) for row in rows]
        return [replace(m, attachments=tuple(shared.get(m.message_id, ()))) for m in messages]

    async def member_memories(self, guild_id: int, member_id: int) -> list[Memory]:
        """The server's facts about the member or told by them, oldest first."""
        rows = await self.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE guild_id = ?1 AND (about_id = ?2 OR said_by_id = ?2)"
            " ORDER BY id",
            (guild_id, member_id),
        )
        return memories_from_rows(rows)

    async def member_usage(self, guild_id: int, member_id: int) -> list[TokenUsage]:
        """The member's token counts in the server, a row per day, channel and model, oldest first."""
        rows = await self.read(
            f"SELECT {_USAGE_COLUMNS} FROM token_usage WHERE guild_id = ? AND member_id = ?"
            " ORDER BY day, channel_id, model",
            (guild_id, member_id),
        )
        return [TokenUsage(_EPOCH_DAY + timedelta(days=int(day)), *row) for day, *row in rows]

    async def member_feedback(self, guild_id: int, member_id: int) -> list[Feedback]:
        """Their feedback on the support answers to their questions in the server, oldest first."""
        rows = await self.read(
            f"SELECT {FEEDBACK_COLUMNS} FROM support_feedback WHERE guild_id = ? AND asker_id = ?"
            " ORDER BY offered_at, question_id",
            (guild_id, member_id),
        )
        return [feedback_of(row) for row in rows]

    async def member_counts(self, guild_id: int, member_id: int) -> MemberCounts:
        """How many messages, files, facts, usage rows, conversation summaries and feedback rows the archive holds
        of them."""
        who = (guild_id, member_id)
        ((messages,),) = await self.read(f"SELECT count(*) {_MEMBER_MESSAGES}", who)
        ((files,),) = await self.read(
            f"SELECT count(*) FROM attachments WHERE message_id IN (SELECT message_id {_MEMBER_MESSAGES})", who
        )
        ((facts,),) = await self.read(
            "SELECT count(*) FROM memories WHERE guild_id = ?1 AND (about_id = ?2 OR said_by_id = ?2)", who
        )
        ((usage,),) = await self.read("SELECT count(*) FROM token_usage WHERE guild_id = ?1 AND member_id = ?2", who)
        ((summaries,),) = await self.read(f"SELECT count(*) {_SUMMARIES_QUOTING}", who)
        ((feedback,),) = await self.read(
            "SELECT count(*) FROM support_feedback WHERE guild_id = ?1 AND asker_id = ?2", who
        )
        return MemberCounts(int(messages), int(files), int(facts), int(usage), int(summaries), int(feedback))

    async def snapshot_channels(self, guild_id: int) -> list[int]:
        """The server's channels with saved conversations (`/parley-admin context save`), which may quote anyone."""
        rows = await self.read("SELECT DISTINCT channel_id FROM context_snapshots WHERE guild_id = ?", (guild_id,))
        return sorted(int(channel_id) for (channel_id,) in rows)

    # -- Erasing it --

    async def erase_member(self, guild_id: int, member_id: int, message_ids: Sequence[int]) -> None:
        """Delete the member's messages `message_ids` (with their files, the facts made from them and the
        conversation summaries written from them), the decisions on anything they wrote (their /ask questions too),
        the server's facts about them or told by them, their model choice, their feedback on support answers, and
        their id from its token counts (the counts stay, unattributed); returns once that is committed.

        Raises:
            ArchiveWriteFailed: something of it is still there (the writer logs why); what was deleted stays deleted.
        """
        self.delete(message_ids)
        self._enqueue(_ERASE_DECISIONS, (guild_id, member_id))
        self._enqueue(_ANONYMISE_USAGE, (guild_id, member_id))
        self._enqueue(FORGET_MODEL_CHOICE, (guild_id, member_id))
        self._enqueue(_ERASE_FEEDBACK, (guild_id, member_id))
        # Committed with what was queued before it, the facts checked gone.
        await self.forget_memories([memory.id for memory in await self.member_memories(guild_id, member_id)])
        left = await self.member_counts(guild_id, member_id)
        chose = await self.read(
            "SELECT 1 FROM member_models WHERE guild_id = ?1 AND member_id = ?2", (guild_id, member_id)
        )
        if left.facts or left.usage_rows or left.feedback or chose or await self._still_archived(message_ids):
            raise ArchiveWriteFailed(f"member {member_id}'s data could not all be erased")

    async def _still_archived(self, message_ids: Sequence[int]) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(message_ids), MESSAGES_AT_ONCE):
            chunk = list(message_ids[start : start + MESSAGES_AT_ONCE])
            rows = await self.read(
                f"SELECT message_id FROM messages WHERE message_id IN ({', '.join('?' * len(chunk))})", chunk
            )
            found.update(int(message_id) for (message_id,) in rows)
        return found
