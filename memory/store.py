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
from datetime import UTC, datetime

from pydantic_ai.framing import close_tag, open_tag, wrap
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from archive import Memory, MemoryTables, Snapshot
from prompting.quoting import MEMORIES_TAG, MEMORY_TAG

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


class MemoryStore:
    """Facts and context snapshots in the archive (`MemoryTables`); reads see committed data only."""

    def __init__(self, archive: MemoryTables) -> None:
        self.archive = archive

    @classmethod
    async def open(cls, archive: MemoryTables) -> MemoryStore:
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
        about_member_id: int | None = None,
        now: datetime | None = None,
    ) -> Memory:
        """Store a fact and return once it is committed to disk: about the speaker, another member
        (`about_member_id`: theirs to export, forget and erase), or no one in particular.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why); nothing was remembered.
        """
        memory = Memory(
            await self.archive.new_memory_id(),
            guild_id,
            channel_id,
            said_by_id if about_speaker else about_member_id,
            said_by_id,
            source_message_id,
            " ".join(fact.split())[:FACT_MAX_CHARS],
            now or datetime.now(UTC),
        )
        await self.archive.add_memory(memory)
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
        # Channel 0 is no channel's: only the member's own facts about themselves are in scope then.
        channel = channel_id if channel_facts else 0
        return await self.archive.recall_memories(
            query, guild_id=guild_id, channel_id=channel, member_id=member_id, limit=limit
        )

    async def visible(
        self, *, guild_id: int, channel_id: int, member_id: int, limit: int, channel_facts: bool = True
    ) -> list[Memory]:
        """The newest facts in scope for `member_id` in `channel_id`: the channel's, and their own in the server.

        Without `channel_facts` (a member who may not read the channel's history), their own alone, as `recall`.
        """
        # Channel 0 is no channel's, as in `recall`.
        channel = channel_id if channel_facts else 0
        return await self.archive.visible_memories(
            guild_id=guild_id, channel_id=channel, member_id=member_id, limit=limit
        )

    async def get(self, memory_id: int) -> Memory | None:
        return await self.archive.memory(memory_id)

    async def about_member(self, *, guild_id: int, member_id: int) -> list[int]:
        """The ids of the server's facts about `member_id` or told by them."""
        return await self.archive.memory_ids_about(guild_id=guild_id, member_id=member_id)

    async def in_channel(self, channel_id: int) -> list[int]:
        """The ids of the facts made in `channel_id`."""
        return await self.archive.memory_ids_in_channel(channel_id)

    async def forget(self, memory_ids: Sequence[int]) -> int:
        """Delete these facts and return once that is committed; how many were deleted.

        Raises:
            ArchiveWriteFailed: the deletion was dropped (the writer logs why).
        """
        await self.archive.forget_memories(memory_ids)
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
        history = ModelMessagesTypeAdapter.dump_json(list(messages)).decode()
        await self.archive.save_snapshot(
            channel_id=channel_id,
            name=name,
            guild_id=guild_id,
            saved_by=saved_by,
            saved_at=now or datetime.now(UTC),
            history=history,
        )

    async def snapshots(self, channel_id: int) -> list[Snapshot]:
        """The channel's snapshots, newest first."""
        return await self.archive.snapshots(channel_id)

    async def load_snapshot(self, channel_id: int, name: str) -> list[ModelMessage] | None:
        """The model history saved as `name` in this channel, or None if there is none by that name."""
        history = await self.archive.snapshot_history(channel_id, name)
        if history is None:
            return None
        return ModelMessagesTypeAdapter.validate_json(history)


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
