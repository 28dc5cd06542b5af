"""The channels in support mode (`/parley-admin support on`): text and forum channels where Parley answers the
questions nobody addressed when the server's documents hold the answer (helpdesk/).

The SQL is written once here, in the SQLite dialect both backends take (as in pin_channels.py). A row is a channel
in support mode; turning it off deletes the row, and so does deleting the channel or leaving the server
(archive/bot_writes.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

from archive import ArchiveWriteFailed, Write
from archive.tables import BackendTables
from archive.times import to_ms

_SUPPORT_ON = Write(
    "support_on",
    (
        "INSERT INTO support_channels (channel_id, guild_id, set_by, set_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, set_by = excluded.set_by,"
        " set_at = excluded.set_at",
    ),
)
_SUPPORT_OFF = Write("support_off", ("DELETE FROM support_channels WHERE channel_id = ?",))


class SupportChannelRows(BackendTables):
    """`archive.SupportChannelTables` for both backends, on their queue and read connection."""

    async def set_support(
        self, channel_id: int, guild_id: int, on: bool, *, set_by: int, now: datetime | None = None
    ) -> None:
        """Store whether the channel is in support mode; returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored choice is unchanged.
        """
        if on:
            self._enqueue(_SUPPORT_ON, (channel_id, guild_id, set_by, to_ms(now or datetime.now(UTC))))
        else:
            self._enqueue(_SUPPORT_OFF, (channel_id,))
        await self.flush()
        if (channel_id in await self.support_channels()) != on:
            raise ArchiveWriteFailed(f"the support mode of channel {channel_id} could not be stored")

    async def support_channels(self) -> dict[int, int]:
        """The channels in support mode, with their servers'."""
        rows = await self.read("SELECT channel_id, guild_id FROM support_channels")
        return {int(channel_id): int(guild_id) for channel_id, guild_id in rows}
