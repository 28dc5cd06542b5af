"""The channels' digests (`/parley-admin digest`): each channel's schedule, and the digest period last taken up.

The SQL is written once here, in the SQLite dialect both backends take (as in stores.py). A period is the moment
its digest is due, in ms since the epoch, so periods only grow: claiming one is a single conditional `UPDATE … WHERE
last_period < :period` on the channel's row, which Postgres's row lock makes one process's only (the others
re-check the condition once it commits, and find it false), and which SQLite's one writer runs in turn. A claim
also names the schedule it was worked out from, so a process that read the schedule before an admin changed it
claims nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archive import ArchiveWriteFailed, Digest, Write
from archive.tables import BackendTables

_COLUMNS = "channel_id, guild_id, every, hour, weekday, last_period, claimant, set_by, set_at"
_SET_DIGEST = Write(
    "set_digest",
    (
        f"INSERT INTO digests ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, every = excluded.every,"
        " hour = excluded.hour, weekday = excluded.weekday, last_period = excluded.last_period,"
        " claimant = excluded.claimant, set_by = excluded.set_by, set_at = excluded.set_at",
    ),
)
_CLEAR_DIGEST = Write("clear_digest", ("DELETE FROM digests WHERE channel_id = ?",))
# Taken only from a period before it, and only on the schedule the claimant read.
_CLAIM_DIGEST = Write(
    "claim_digest",
    (
        "UPDATE digests SET last_period = ?1, claimant = ?2"
        " WHERE channel_id = ?3 AND last_period < ?1 AND every = ?4 AND hour = ?5 AND weekday = ?6",
    ),
)

# Gives a period back to the one before it, only while `claimant` still holds it (no later period and no other
# claimant has taken the row since).
_RELEASE_DIGEST = Write(
    "release_digest",
    ("UPDATE digests SET last_period = ?1 WHERE channel_id = ?2 AND claimant = ?3 AND last_period = ?4",),
)


class DigestTables(BackendTables):
    """Named reads and writes of the digests' table, on a backend's queue and read connection."""

    async def digests(self) -> list[Digest]:
        """Every channel's digest, by channel id."""
        return [_digest(row) for row in await self.read(f"SELECT {_COLUMNS} FROM digests ORDER BY channel_id")]

    async def digest(self, channel_id: int) -> Digest | None:
        """The channel's digest, or None if it has none."""
        rows = await self.read(f"SELECT {_COLUMNS} FROM digests WHERE channel_id = ?", (channel_id,))
        return next((_digest(row) for row in rows), None)

    async def set_digest(self, digest: Digest) -> None:
        """Store (or replace) the channel's digest; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_SET_DIGEST, tuple(digest))
        await self.flush()
        if await self.digest(digest.channel_id) != digest:
            raise ArchiveWriteFailed(f"the digest of channel {digest.channel_id} could not be stored")

    async def clear_digest(self, channel_id: int) -> None:
        """Drop the channel's digest; returns once that is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_CLEAR_DIGEST, (channel_id,))
        await self.flush()
        if await self.digest(channel_id) is not None:
            raise ArchiveWriteFailed(f"the digest of channel {channel_id} could not be cleared")

    async def claim_digest(self, schedule: Digest, period: int, claimant: str) -> bool:
        """Take up the digest of `period` (a later one than the channel's last) for `claimant`, on the schedule
        `schedule` says; whether `claimant` holds it now.

        Atomic across every process sharing the archive: of several claimants of one period exactly one is told
        True. False as well when the channel's schedule changed or its digest was turned off since it was read.
        """
        params = (period, claimant, schedule.channel_id, schedule.every, schedule.hour, schedule.weekday)
        self._enqueue(_CLAIM_DIGEST, params)
        await self.flush()
        rows = await self.read("SELECT last_period, claimant FROM digests WHERE channel_id = ?", (schedule.channel_id,))
        return bool(rows) and (int(rows[0][0]), str(rows[0][1])) == (period, claimant)

    async def release_digest(self, schedule: Digest, period: int, claimant: str) -> None:
        """Give back `period`, claimed by `claimant` from `schedule` (as read before the claim: its `last_period`
        is the one restored), so the next tick claims it again; nothing if the claim no longer stands.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        self._enqueue(_RELEASE_DIGEST, (schedule.last_period, schedule.channel_id, claimant, period))
        await self.flush()


def _digest(row: Sequence[Any]) -> Digest:
    channel_id, guild_id, every, hour, weekday, last_period, claimant, set_by, set_at = row
    return Digest(
        int(channel_id), int(guild_id), str(every), int(hour), int(weekday), int(last_period), str(claimant),
        int(set_by), int(set_at),
    )  # fmt: skip
