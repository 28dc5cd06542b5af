"""What Parley remembers: facts members asked it to keep, and named copies of a channel's model history.

Both live in the archive (schema v6 of either backend) and are written through its writer; a write that
a member is told about is committed before the call returns. Who may see a fact
is decided here from the place and person asking, never from anything the model says:

- a fact is recalled in the channel where it was made;
- a fact a member told about themselves is also recalled in any channel of the same server where
  that member is the one talking to Parley;
- nothing crosses servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.framing import close_tag, open_tag, wrap
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from archive import Archive, ArchiveWriteFailed, Write
from archive.postgres import tsquery_expression
from archive.queued import from_ms, to_ms
from archive.sqlite import match_expression
from quoting import MEMORIES_TAG, MEMORY_TAG

__all__ = [
    "FACT_MAX_CHARS",
    "SNAPSHOT_NAME_MAX_CHARS",
    "Memory",
    "MemoryStore",
    "Snapshot",
    "format_memories",
]

# A fact is a sentence or two; a model pasting a whole conversation into one would crowd out every other.
FACT_MAX_CHARS = 500
SNAPSHOT_NAME_MAX_CHARS = 64
_COLUMNS = "id, guild_id, channel_id, about_id, said_by_id, source_message_id, fact, created_at"
# Ranking every match of a common word among a busy server's memories costs milliseconds per thousand;
# bm25 over the newest in-scope matches keeps recall flat.
_RECALL_CANDIDATES = 200

_REMEMBER = Write(
    "remember",
    (f"INSERT INTO memories ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",),
)
_FORGET_IDS = Write("forget_memory", ("DELETE FROM memories WHERE id = ?",))
_SAVE_SNAPSHOT = Write(
    "save_snapshot",
    (
        "INSERT INTO context_snapshots (channel_id, name, guild_id, saved_by, saved_at, history)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel_id, name) DO UPDATE SET guild_id = excluded.guild_id,"
        " saved_by = excluded.saved_by, saved_at = excluded.saved_at, history = excluded.history",
    ),
)

# In scope: made in this channel, or told by the asking member about themselves in this server.
# :channel is 0 (no channel has it) for a member who may not read the channel's history.
_SCOPE = "(m.channel_id = :channel OR (m.guild_id = :guild AND m.about_id = :member AND m.said_by_id = :member))"
_RECALL_SQL = f"""
SELECT {_COLUMNS} FROM (
    SELECT {", ".join("m." + name for name in _COLUMNS.split(", "))}, bm25(memories_fts) AS score
    FROM memories_fts CROSS JOIN memories AS m ON m.id = memories_fts.rowid
    WHERE memories_fts MATCH :match AND {_SCOPE}
    ORDER BY memories_fts.rowid DESC
    LIMIT {_RECALL_CANDIDATES}
)
ORDER BY score, id DESC
LIMIT :limit
"""
# Postgres ranks with ts_rank over the words column its schema generates from the fact.
_RECALL_POSTGRES_SQL = f"""
SELECT {_COLUMNS} FROM (
    SELECT {", ".join("m." + name for name in _COLUMNS.split(", "))}, ts_rank(m.words, query) AS score
    FROM memories AS m, to_tsquery('simple', :match) AS query
    WHERE m.words @@ query AND {_SCOPE}
    ORDER BY m.id DESC
    LIMIT {_RECALL_CANDIDATES}
) AS candidates
ORDER BY score DESC, id DESC
LIMIT :limit
"""
# Two index range reads (the channel's, the member's own facts in the server) instead of a scan.
_LIST_SQL = f"""
SELECT {_COLUMNS} FROM memories WHERE id IN (
    SELECT id FROM memories WHERE channel_id = :channel
    UNION SELECT id FROM memories WHERE guild_id = :guild AND about_id = :member AND said_by_id = :member
) ORDER BY id DESC LIMIT :limit
"""


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered fact: what, about whom (None: about no one in particular), who said it, where and when."""

    id: int
    guild_id: int
    channel_id: int
    about_id: int | None
    said_by_id: int
    source_message_id: int
    fact: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A named copy of a channel's conversation model history."""

    name: str
    saved_by: int
    saved_at: datetime
    messages: int


class MemoryStore:
    """Facts and context snapshots in the archive; reads see committed data only."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    @classmethod
    async def open(cls, archive: Archive) -> MemoryStore:
        """The store on `archive`, which must stay open as long as the store is used."""
        return cls(archive)

    # -- Facts --

    async def remember(
        self,
        *,
        guild_id: int,
        channel_id: int,
        said_by_id: int,
        source_message_id: int,
        fact: str,
        about_speaker: bool,
        now: datetime | None = None,
    ) -> Memory:
        """Store a fact and return once it is committed to disk.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why); nothing was remembered.
        """
        memory = Memory(
            await self.archive.new_id("memories"),
            guild_id,
            channel_id,
            said_by_id if about_speaker else None,
            said_by_id,
            source_message_id,
            " ".join(fact.split())[:FACT_MAX_CHARS],
            now or datetime.now(UTC),
        )
        self.archive.enqueue(
            _REMEMBER,
            (
                memory.id, guild_id, channel_id, memory.about_id, said_by_id, source_message_id,
                memory.fact, to_ms(memory.created_at),
            ),
        )  # fmt: skip
        await self.archive.flush()
        if not await self.archive.read("SELECT 1 FROM memories WHERE id = ?", (memory.id,)):
            raise ArchiveWriteFailed("the memory could not be stored")
        return memory

    async def recall(
        self,
        query: str,
        *,
        guild_id: int,
        channel_id: int,
        member_id: int,
        limit: int = 10,
        channel_facts: bool = True,
    ) -> list[Memory]:
        """The facts in scope for `member_id` talking in `channel_id` that best match `query`.

        All of the query's words must match; if none does, any of them. Without `channel_facts` (a member
        who may not read the channel's history) only the member's own facts about themselves are searched.
        """
        channel = channel_id if channel_facts else 0
        scope = {"channel": channel, "guild": guild_id, "member": member_id, "limit": limit}
        found: list[Memory] = []
        postgres = self.archive.dialect == "postgres"
        expression = tsquery_expression if postgres else match_expression
        for op in ("AND", "OR"):
            match = expression(query, op)
            if match is None:
                return []
            found = _memories(
                await self.archive.read(_RECALL_POSTGRES_SQL if postgres else _RECALL_SQL, scope | {"match": match})
            )
            if found:
                break
        return found

    async def visible(
        self, *, guild_id: int, channel_id: int, member_id: int, limit: int, channel_facts: bool = True
    ) -> list[Memory]:
        """The newest facts in scope for `member_id` in `channel_id`: the channel's, and their own in the server.

        Without `channel_facts` (a member who may not read the channel's history), their own alone, as `recall`.
        """
        channel = channel_id if channel_facts else 0
        scope = {"channel": channel, "guild": guild_id, "member": member_id, "limit": limit}
        return _memories(await self.archive.read(_LIST_SQL, scope))

    async def get(self, memory_id: int) -> Memory | None:
        rows = await self.archive.read(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return next(iter(_memories(rows)), None)

    async def about_member(self, *, guild_id: int, member_id: int) -> list[int]:
        """The ids of the server's facts about `member_id` or told by them."""
        rows = await self.archive.read(
            "SELECT id FROM memories WHERE guild_id = ?1 AND about_id = ?2"
            " UNION SELECT id FROM memories WHERE guild_id = ?1 AND said_by_id = ?2",
            (guild_id, member_id),
        )
        return [int(memory_id) for (memory_id,) in rows]

    async def in_channel(self, channel_id: int) -> list[int]:
        """The ids of the facts made in `channel_id`."""
        rows = await self.archive.read("SELECT id FROM memories WHERE channel_id = ?", (channel_id,))
        return [int(memory_id) for (memory_id,) in rows]

    async def forget(self, memory_ids: Sequence[int]) -> int:
        """Delete these facts and return once that is committed; how many were deleted.

        Raises:
            ArchiveWriteFailed: the deletion was dropped (the writer logs why).
        """
        for memory_id in memory_ids:
            self.archive.enqueue(_FORGET_IDS, (memory_id,))
        await self.archive.flush()
        left = [memory_id for memory_id in memory_ids if await self.get(memory_id) is not None]
        if left:
            raise ArchiveWriteFailed(f"{len(left)} memories could not be deleted")
        return len(memory_ids)

    # -- Context snapshots --

    async def save_snapshot(
        self,
        *,
        guild_id: int,
        channel_id: int,
        name: str,
        saved_by: int,
        messages: Sequence[ModelMessage],
        now: datetime | None = None,
    ) -> None:
        """Store (or replace) the channel's snapshot `name`; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why).
        """
        saved_at = to_ms(now or datetime.now(UTC))
        history = ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
        self.archive.enqueue(_SAVE_SNAPSHOT, (channel_id, name, guild_id, saved_by, saved_at, history))
        await self.archive.flush()
        rows = await self.archive.read(
            "SELECT saved_at FROM context_snapshots WHERE channel_id = ? AND name = ?", (channel_id, name)
        )
        if [saved_at] != [row[0] for row in rows]:
            raise ArchiveWriteFailed(f"the snapshot {name!r} could not be stored")

    async def snapshots(self, channel_id: int) -> list[Snapshot]:
        """The channel's snapshots, newest first."""
        rows = await self.archive.read(
            "SELECT name, saved_by, saved_at, json_array_length(history) FROM context_snapshots"
            " WHERE channel_id = ? ORDER BY saved_at DESC, name",
            (channel_id,),
        )
        return [
            Snapshot(name, int(saved_by), from_ms(saved_at), int(count)) for name, saved_by, saved_at, count in rows
        ]

    async def load_snapshot(self, channel_id: int, name: str) -> list[ModelMessage] | None:
        """The model history saved as `name` in this channel, or None if there is none by that name."""
        rows = await self.archive.read(
            "SELECT history FROM context_snapshots WHERE channel_id = ? AND name = ?", (channel_id, name)
        )
        if not rows:
            return None
        return ModelMessagesTypeAdapter.validate_json(rows[0][0])


def format_memories(memories: Sequence[Memory], *, speaker_id: int) -> str:
    """Facts as quoted data for the model: a `<memories>` of `<memory>` elements, each saying who told it,
    whether it is about the person now asking, when, and the message it came from."""
    if not memories:
        return "No memories found."
    elements = [
        wrap(
            MEMORY_TAG,
            memory.fact,
            id=str(memory.id),
            said_by_id=str(memory.said_by_id),
            about_id=None if memory.about_id is None else str(memory.about_id),
            about_speaker="true" if memory.about_id == speaker_id else None,
            time_utc=f"{memory.created_at:%Y-%m-%d %H:%M}",
            message_id=str(memory.source_message_id),
        )
        for memory in memories
    ]
    return "\n".join([open_tag(MEMORIES_TAG, count=str(len(elements))), *elements, close_tag(MEMORIES_TAG)])


def _memories(rows: Sequence[Sequence[Any]]) -> list[Memory]:
    return [
        Memory(
            int(memory_id),
            int(guild_id),
            int(channel_id),
            None if about_id is None else int(about_id),
            int(said_by_id),
            int(source_message_id),
            fact,
            from_ms(created_at),
        )
        for memory_id, guild_id, channel_id, about_id, said_by_id, source_message_id, fact, created_at in rows
    ]
