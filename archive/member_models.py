"""The model each member chose for Parley's answers to them in a server (`/parley model`).

The SQL is written once here, in the SQLite dialect both backends take (as in pin_channels.py). A row is a member's
choice; choosing the profile's model again deletes it. It is the member's data: exported and erased with the rest of
it (archive/members.py), and gone with its server.
"""

from __future__ import annotations

from datetime import UTC, datetime

from archive import ArchiveWriteFailed, Write
from archive.tables import BackendTables
from archive.times import to_ms

_CHOOSE = Write(
    "choose_model",
    (
        "INSERT INTO member_models (guild_id, member_id, model, chosen_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (guild_id, member_id) DO UPDATE SET model = excluded.model, chosen_at = excluded.chosen_at",
    ),
)
FORGET_MODEL_CHOICE = Write("forget_model_choice", ("DELETE FROM member_models WHERE guild_id = ? AND member_id = ?",))


class MemberModelRows(BackendTables):
    """`archive.MemberModelTable` for both backends, on their queue and read connection."""

    async def set_member_model(
        self, guild_id: int, member_id: int, model: str | None, *, now: datetime | None = None
    ) -> None:
        """Store the member's model for the server (None: back to the profile's); returns once it is committed.

        Raises:
            ArchiveWriteFailed: the write was dropped (the writer logs why), so the stored choice is unchanged.
        """
        if model is None:
            self._enqueue(FORGET_MODEL_CHOICE, (guild_id, member_id))
        else:
            self._enqueue(_CHOOSE, (guild_id, member_id, model, to_ms(now or datetime.now(UTC))))
        await self.flush()
        if await self.member_model(guild_id, member_id) != model:
            raise ArchiveWriteFailed(f"the model choice of member {member_id} could not be stored")

    async def member_model(self, guild_id: int, member_id: int) -> str | None:
        """The model the member chose in the server; None: they chose none."""
        rows = await self.read(
            "SELECT model FROM member_models WHERE guild_id = ? AND member_id = ?", (guild_id, member_id)
        )
        return str(rows[0][0]) if rows else None
