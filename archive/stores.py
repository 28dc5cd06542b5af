"""The tables the small stores keep in the archive (memories, context snapshots, profile values) and the shared
settings' rows another process may change, as named reads and writes both backends offer.

Their SQL is written once here, in the SQLite dialect both backends take (the Postgres backend numbers the
placeholders its way); only searching memories differs, so each backend names its own query for it
(`recall_sql`) and its match expression (`_memory_match`). A write its caller waits for returns once
committed and raises `ArchiveWriteFailed` otherwise.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from archive import AccessEntry, ArchiveWriteFailed, Memory, ProfileValue, ReconciliationProgress, Snapshot, Write
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

MEMORY_COLUMNS = "id, guild_id, channel_id, about_id, said_by_id, source_message_id, fact, created_at"
# Ranking every match of a common word among a busy server's memories costs milliseconds per thousand;
# bm25 over the newest in-scope matches keeps recall flat.
RECALL_CANDIDATES = 200
# In scope: made in this channel, or told by the asking member about themselves in this server.
# :channel is 0 (no channel has it) for a member who may not read the channel's history.
MEMORY_SCOPE = "(m.channel_id = :channel OR (m.guild_id = :guild AND m.about_id = :member AND m.said_by_id = :member))"

_REMEMBER = Write(
    "remember",
    (f"INSERT INTO memories ({MEMORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",),
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
# Two index range reads (the channel's, the member's own facts in the server) instead of a scan.
_LIST_SQL = f"""
SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN (
    SELECT id FROM memories WHERE channel_id = :channel
    UNION SELECT id FROM memories WHERE guild_id = :guild AND about_id = :member AND said_by_id = :member
) ORDER BY id DESC LIMIT :limit
"""

_SET_PROFILE_VALUE = Write(
    "set_profile_value",
    (
        "INSERT INTO profile_settings (scope_id, field, guild_id, value, set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (scope_id, field) DO UPDATE SET guild_id = excluded.guild_id, value = excluded.value,"
        " set_by = excluded.set_by, set_at = excluded.set_at",
    ),
)
_RESET_PROFILE_VALUE = Write("reset_profile_value", ("DELETE FROM profile_settings WHERE scope_id = ? AND field = ?",))
_RECONCILIATION_COLUMNS = "channel_id, guild_id, upto_id, reached_id, again_id"
_SAVE_RECONCILIATION = Write(
    "save_reconciliation_progress",
    (
        f"INSERT INTO reconciliation ({_RECONCILIATION_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, upto_id = excluded.upto_id,"
        " reached_id = excluded.reached_id, again_id = excluded.again_id",
    ),
)
_SELECT_PROFILE_VALUES = "SELECT scope_id, field, guild_id, value, set_by, set_at FROM profile_settings"
# The primary key makes the first claimant's row the only one, whichever process commits first.
_CLAIM_MESSAGE = Write(
    "claim_message",
    ("INSERT INTO message_claims (message_id, claimant, claimed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",),
)
# Only the claimant's own claim: one another process took meanwhile stays.
_RELEASE_MESSAGE = Write("release_message", ("DELETE FROM message_claims WHERE message_id = ? AND claimant = ?",))

_SET_ACCESS_ENTRY = Write(
    "set_access_entry",
    (
        "INSERT INTO access_entries (guild_id, target_id, kind, listed, set_by, set_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (guild_id, target_id) DO UPDATE SET kind = excluded.kind, listed = excluded.listed,"
        " set_by = excluded.set_by, set_at = excluded.set_at",
    ),
)
_CLEAR_ACCESS_ENTRY = Write("clear_access_entry", ("DELETE FROM access_entries WHERE guild_id = ? AND target_id = ?",))
_SELECT_ACCESS_ENTRIES = "SELECT guild_id, target_id, kind, listed, set_by, set_at FROM access_entries"


class StoreTables(BackendTables):
    """Named reads and writes of the small stores' tables, on a backend's queue and read connection."""

    # The backend's memory search, with :match (`_memory_match`), :channel, :guild, :member and :limit.
    recall_sql: ClassVar[str]
    # The newest message ever claimed in the archive, where this process alone writes it (`_newer_than_every_claim`).
    _newest_claim: int | None = None

    @abstractmethod
    def _memory_match(self, query: str, op: str) -> str | None:
        """Free text as the backend's match expression: all its words with "AND", any with "OR"; None: no word."""

    # -- Memories --

    async def new_memory_id(self) -> int:
        """A fresh id for a memory about to be added."""
        return await self.new_id("memories")

    async def add_memory(self, memory: Memory) -> None:
        """Store `memory`; returns once it is committed."""
        self._enqueue(
            _REMEMBER,
            (
                memory.id, memory.guild_id, memory.channel_id, memory.about_id, memory.said_by_id,
                memory.source_message_id, memory.fact, to_ms(memory.created_at),
            ),
        )  # fmt: skip
        await self.flush()
        if not await self.read("SELECT 1 FROM memories WHERE id = ?", (memory.id,)):
            raise ArchiveWriteFailed("the memory could not be stored")

    async def recall_memories(
        self, query: str, *, guild_id: int, channel_id: int, member_id: int, limit: int
    ) -> list[Memory]:
        """The memories in scope (`MEMORY_SCOPE`) that best match `query`: with all of its words; if none does,
        with any of them."""
        scope = {"channel": channel_id, "guild": guild_id, "member": member_id, "limit": limit}
        found: list[Memory] = []
        for op in ("AND", "OR"):
            match = self._memory_match(query, op)
            if match is None:
                return []
            found = memories_from_rows(await self.read(self.recall_sql, scope | {"match": match}))
            if found:
                break
        return found

    async def visible_memories(self, *, guild_id: int, channel_id: int, member_id: int, limit: int) -> list[Memory]:
        """The newest memories in scope: made in `channel_id`, or told by `member_id` about themselves in the server."""
        scope = {"channel": channel_id, "guild": guild_id, "member": member_id, "limit": limit}
        return memories_from_rows(await self.read(_LIST_SQL, scope))

    async def memory(self, memory_id: int) -> Memory | None:
        rows = await self.read(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return next(iter(memories_from_rows(rows)), None)

    async def memory_ids_about(self, *, guild_id: int, member_id: int) -> list[int]:
        """The ids of the server's memories about `member_id` or told by them."""
        rows = await self.read(
            "SELECT id FROM memories WHERE guild_id = ?1 AND about_id = ?2"
            " UNION SELECT id FROM memories WHERE guild_id = ?1 AND said_by_id = ?2",
            (guild_id, member_id),
        )
        return [int(memory_id) for (memory_id,) in rows]

    async def memory_ids_in_channel(self, channel_id: int) -> list[int]:
        """The ids of the memories made in `channel_id`."""
        rows = await self.read("SELECT id FROM memories WHERE channel_id = ?", (channel_id,))
        return [int(memory_id) for (memory_id,) in rows]

    async def forget_memories(self, memory_ids: Sequence[int]) -> None:
        """Delete these memories; returns once that is committed."""
        for memory_id in memory_ids:
            self._enqueue(_FORGET_IDS, (memory_id,))
        await self.flush()
        left = [memory_id for memory_id in memory_ids if await self.memory(memory_id) is not None]
        if left:
            raise ArchiveWriteFailed(f"{len(left)} memories could not be deleted")

    # -- Context snapshots --

    async def save_snapshot(
        self, *, channel_id: int, name: str, guild_id: int, saved_by: int, saved_at: datetime, history: str
    ) -> None:
        """Store (or replace) the channel's snapshot `name` (`history`: the model history as JSON); returns once it
        is committed."""
        saved_ms = to_ms(saved_at)
        self._enqueue(_SAVE_SNAPSHOT, (channel_id, name, guild_id, saved_by, saved_ms, history))
        await self.flush()
        rows = await self.read(
            "SELECT saved_at FROM context_snapshots WHERE channel_id = ? AND name = ?", (channel_id, name)
        )
        if [saved_ms] != [row[0] for row in rows]:
            raise ArchiveWriteFailed(f"the snapshot {name!r} could not be stored")

    async def snapshots(self, channel_id: int) -> list[Snapshot]:
        """The channel's snapshots, newest first."""
        rows = await self.read(
            "SELECT name, saved_by, saved_at, json_array_length(history) FROM context_snapshots"
            " WHERE channel_id = ? ORDER BY saved_at DESC, name",
            (channel_id,),
        )
        return [
            Snapshot(name, int(saved_by), from_ms(saved_at), int(count)) for name, saved_by, saved_at, count in rows
        ]

    async def snapshot_history(self, channel_id: int, name: str) -> str | None:
        """The model history (JSON) saved as `name` in this channel, or None if there is none by that name."""
        rows = await self.read(
            "SELECT history FROM context_snapshots WHERE channel_id = ? AND name = ?", (channel_id, name)
        )
        return str(rows[0][0]) if rows else None

    # -- Profile values set by command --

    async def profile_values(self, scope_id: int | None = None) -> list[ProfileValue]:
        """The stored profile values of one channel or server (`scope_id`), or of all."""
        if scope_id is None:
            rows = await self.read(_SELECT_PROFILE_VALUES)
        else:
            rows = await self.read(f"{_SELECT_PROFILE_VALUES} WHERE scope_id = ?", (scope_id,))
        return [ProfileValue(*row) for row in rows]

    async def profile_value(self, scope_id: int, name: str) -> str | None:
        """The committed value of one profile field at one scope, or None."""
        rows = await self.read("SELECT value FROM profile_settings WHERE scope_id = ? AND field = ?", (scope_id, name))
        return next((str(value) for (value,) in rows), None)

    async def set_profile_value(self, value: ProfileValue) -> None:
        """Store one profile value; returns once the writer has committed it (or logged its failure)."""
        self._enqueue(_SET_PROFILE_VALUE, tuple(value))
        await self.flush()

    async def reset_profile_values(self, scope_id: int, names: Sequence[str]) -> None:
        """Drop the profile values `names` at one scope; returns once the writer committed it (or logged why not)."""
        for name in names:
            self._enqueue(_RESET_PROFILE_VALUE, (scope_id, name))
        await self.flush()

    # -- Claims: which process takes up a message --

    async def claim_message(self, message_id: int, claimant: str, claimed_at: datetime) -> bool:
        """Claim a message for `claimant` unless another claimant has it; whether `claimant` holds it now.

        Atomic across every process sharing the archive: the first committed claim stands, so of several
        claimants exactly one is told True. Raises `ArchiveWriteFailed` if no claim could be committed. Where no
        claim can hold it yet (`_newer_than_every_claim`), it is True at once and the claim is committed with the
        writer's next batch (within the archive's flush interval, as the message itself is).
        """
        alone = await self._newer_than_every_claim(message_id)
        self._enqueue(_CLAIM_MESSAGE, (message_id, claimant, to_ms(claimed_at)))
        if alone:
            # No one else can hold it: the claim is `claimant`'s without a round trip, and is committed with the
            # writer's next batch, beside the message it claims. Asking for that commit now would have the writer make
            # the batch ready (the conversation's snapshot included) and hand it to SQLite's thread while the answer's
            # model request is being built: about 2 ms of a mention's inbound on two cores (bench/bench_bot.py).
            return True
        await self.flush()
        rows = await self.read("SELECT claimant FROM message_claims WHERE message_id = ?", (message_id,))
        if not rows:
            raise ArchiveWriteFailed(f"the claim on message {message_id} could not be stored")
        return bool(rows[0][0] == claimant)

    async def _newer_than_every_claim(self, message_id: int) -> bool:
        """Whether no claim can hold the message yet: no other process writes the archive, and the message is newer
        (snowflakes grow with time) than every claim stored before this process's first and every claim since."""
        if not self._sole_writer():
            return False
        if self._newest_claim is None:
            rows = await self.read("SELECT COALESCE(MAX(message_id), 0) FROM message_claims")
            self._newest_claim = max(int(rows[0][0]), self._newest_claim or 0)  # another claim may have come meanwhile
        newer = message_id > self._newest_claim
        self._newest_claim = max(self._newest_claim, message_id)
        return newer

    async def release_message(self, message_id: int, claimant: str) -> None:
        """Give back `claimant`'s claim on a message it could not take up, so the next claimant may; returns once
        the writer committed it (or logged why not)."""
        self._enqueue(_RELEASE_MESSAGE, (message_id, claimant))
        await self.flush()

    # -- The recheck of archived messages against Discord --

    async def reconciliation_progress(self) -> dict[int, ReconciliationProgress]:
        """Every channel's recheck progress, by channel id."""
        rows = await self.read(f"SELECT {_RECONCILIATION_COLUMNS} FROM reconciliation")
        return {
            int(channel_id): ReconciliationProgress(
                int(channel_id), int(guild_id), int(upto_id), int(reached_id), None if again is None else int(again)
            )
            for channel_id, guild_id, upto_id, reached_id, again in rows
        }

    async def save_reconciliation_progress(self, progress: ReconciliationProgress) -> None:
        """Store (or replace) one channel's recheck progress; returns once the writer has committed it (or logged
        why not)."""
        p = progress
        self._enqueue(_SAVE_RECONCILIATION, (p.channel_id, p.guild_id, p.upto_id, p.reached_id, p.again_id))
        await self.flush()

    # -- Access lists set by command --

    async def access_entries(self, guild_id: int | None = None) -> list[AccessEntry]:
        """The stored access entries of one server, or of all, oldest first."""
        if guild_id is None:
            rows = await self.read(f"{_SELECT_ACCESS_ENTRIES} ORDER BY set_at, target_id")
        else:
            rows = await self.read(
                f"{_SELECT_ACCESS_ENTRIES} WHERE guild_id = ? ORDER BY set_at, target_id", (guild_id,)
            )
        return [AccessEntry(*row) for row in rows]

    async def set_access_entry(self, entry: AccessEntry) -> None:
        """Store one server's entry for a target (replacing its earlier one); returns once it is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_SET_ACCESS_ENTRY, tuple(entry))
        await self.flush()
        if entry not in await self._access_entry(entry.guild_id, entry.target_id):
            raise ArchiveWriteFailed(f"the access entry for {entry.target_id} could not be stored")

    async def clear_access_entry(self, guild_id: int, target_id: int) -> None:
        """Drop one server's entry for a target; returns once that is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_CLEAR_ACCESS_ENTRY, (guild_id, target_id))
        await self.flush()
        if await self._access_entry(guild_id, target_id):
            raise ArchiveWriteFailed(f"the access entry for {target_id} could not be cleared")

    async def _access_entry(self, guild_id: int, target_id: int) -> list[AccessEntry]:
        rows = await self.read(f"{_SELECT_ACCESS_ENTRIES} WHERE guild_id = ? AND target_id = ?", (guild_id, target_id))
        return [AccessEntry(*row) for row in rows]

    # -- Shared settings' single rows, read again when another process announces a change --

    async def forget_marker(self, channel_id: int) -> int | None:
        rows = await self.read("SELECT after_id FROM forget_markers WHERE channel_id = ?", (channel_id,))
        return int(rows[0][0]) if rows else None

    async def threads_enabled(self, channel_id: int) -> bool:
        rows = await self.read("SELECT threads FROM thread_settings WHERE channel_id = ?", (channel_id,))
        return bool(rows and rows[0][0])

    async def own_thread_guild(self, thread_id: int) -> int | None:
        """The server of a thread Parley opened, or None if it is not one."""
        rows = await self.read("SELECT guild_id FROM own_threads WHERE thread_id = ?", (thread_id,))
        return int(rows[0][0]) if rows else None

    async def archived_channels(self) -> dict[int, int]:
        """Every archived channel's server, by channel id."""
        rows = await self.read("SELECT channel_id, guild_id FROM channels")
        return {int(channel_id): int(guild_id) for channel_id, guild_id in rows}


def memories_from_rows(rows: Sequence[Sequence[Any]]) -> list[Memory]:
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
