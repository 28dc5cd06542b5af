"""The support desk's tables (helpdesk/): the channels in support mode (`/parley-admin support on`), text and forum
channels where Parley answers the questions nobody addressed when the server's documents hold the answer, and the
forum posts waiting for their hand-off to the staff role.

The SQL is written once here, in the SQLite dialect both backends take (as in pin_channels.py). A row of
`support_channels` is a channel in support mode; turning it off deletes the row, and so does deleting the channel or
leaving the server (archive/bot_writes.py). A row of `support_handoffs` is a post waiting until `due_at`; handing
it off is one conditional `UPDATE … WHERE claimant IS NULL`, which one process alone wins (as a digest's period is
claimed, archive/digests.py), so a post is handed off once, whichever process or restart gets to it. Its asker's
erasure deletes it (archive/members.py), and so does deleting its thread or leaving the server.
"""

from __future__ import annotations

from datetime import UTC, datetime

from archive import ArchiveWriteFailed, SupportHandoff, Write
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

_SUPPORT_ON = Write(
    "support_on",
    (
        "INSERT INTO support_channels (channel_id, guild_id, set_by, set_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, set_by = excluded.set_by,"
        " set_at = excluded.set_at",
    ),
)
_SUPPORT_OFF = Write("support_off", ("DELETE FROM support_channels WHERE channel_id = ?",))
_AWAIT_HANDOFF = Write(
    "await_handoff",
    (
        "INSERT INTO support_handoffs (message_id, guild_id, asker_id, due_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (message_id) DO NOTHING",
    ),
)
_CLAIM_HANDOFF = Write(
    "claim_handoff", ("UPDATE support_handoffs SET claimant = ? WHERE message_id = ? AND claimant IS NULL",)
)
_DROP_HANDOFF = Write("drop_handoff", ("DELETE FROM support_handoffs WHERE message_id = ?",))


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

    async def await_handoff(self, handoff: SupportHandoff) -> None:
        """Keep a forum post waiting for its hand-off (once: a post already waiting, or handed off, stays as it is);
        returns once it is committed.

        Raises:
            ArchiveWriteFailed: it could not be stored.
        """
        self._enqueue(_AWAIT_HANDOFF, (handoff.message_id, handoff.guild_id, handoff.asker_id, to_ms(handoff.due_at)))
        await self.flush()
        if not await self.read("SELECT 1 FROM support_handoffs WHERE message_id = ?", (handoff.message_id,)):
            raise ArchiveWriteFailed(f"the hand-off of post {handoff.message_id} could not be stored")

    async def due_handoffs(self, now: datetime) -> list[SupportHandoff]:
        """The posts whose hand-off is due by `now` and not yet taken, the earliest first."""
        rows = await self.read(
            "SELECT message_id, guild_id, asker_id, due_at FROM support_handoffs"
            " WHERE claimant IS NULL AND due_at <= ? ORDER BY due_at",
            (to_ms(now),),
        )
        return [
            SupportHandoff(int(post), int(guild), int(asker), from_ms(int(due))) for post, guild, asker, due in rows
        ]

    async def claim_handoff(self, message_id: int, claimant: str) -> bool:
        """Take the post's hand-off for `claimant`; whether it holds it now (of several claimants, across every
        process sharing the archive, exactly one is told True; none once the post was dropped)."""
        self._enqueue(_CLAIM_HANDOFF, (claimant, message_id))
        await self.flush()
        rows = await self.read("SELECT claimant FROM support_handoffs WHERE message_id = ?", (message_id,))
        return bool(rows) and rows[0][0] == claimant

    async def drop_handoff(self, message_id: int) -> None:
        """Forget the post's hand-off (a member answered it, or its asker erased it); returns once committed."""
        self._enqueue(_DROP_HANDOFF, (message_id,))
        await self.flush()
