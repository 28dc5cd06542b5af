"""The channels whose pinned messages are taken into the knowledge base (`/parley-admin knowledge pins on`).

The SQL is written once here, in the SQLite dialect both backends take (as in members.py). A row is a channel
opted in; turning it off deletes the row. Every process reads the rows when it needs them (a pins change, its
start), so nothing is cached that another process could leave stale.
"""

from __future__ import annotations

from datetime import UTC, datetime

from archive import ArchiveWriteFailed, Write
from archive.tables import BackendTables
from archive.times import to_ms

_TAKE_PINS = Write(
    "take_pins",
    (
        "INSERT INTO pin_channels (channel_id, guild_id, set_by, set_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, set_by = excluded.set_by,"
        " set_at = excluded.set_at",
    ),
)
_LEAVE_PINS = Write("leave_pins", ("DELETE FROM pin_channels WHERE channel_id = ?",))


class PinChannelRows(BackendTables):
    """`archive.PinChannelTables` for both backends, on their queue and read connection."""

    async def set_pins_taken(
        self, channel_id: int, guild_id: int, taken: bool, *, set_by: int, now: datetime | None = None
    ) -> None:
        """Store whether the channel's pins are taken into the knowledge base; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored choice is unchanged.
        """
        if taken:
            self._enqueue(_TAKE_PINS, (channel_id, guild_id, set_by, to_ms(now or datetime.now(UTC))))
        else:
            self._enqueue(_LEAVE_PINS, (channel_id,))
        await self.flush()
        if await self.pins_taken(channel_id) != taken:
            raise ArchiveWriteFailed(f"the pins setting of channel {channel_id} could not be stored")

    async def pins_taken(self, channel_id: int) -> bool:
        return bool(await self.read("SELECT 1 FROM pin_channels WHERE channel_id = ?", (channel_id,)))

    async def pin_channels(self, guild_id: int | None = None) -> dict[int, int]:
        """The channels whose pins are taken, with their servers': every server's, or one's."""
        sql = "SELECT channel_id, guild_id FROM pin_channels"
        rows = await (self.read(sql) if guild_id is None else self.read(f"{sql} WHERE guild_id = ?", (guild_id,)))
        return {int(channel_id): int(guild) for channel_id, guild in rows}
