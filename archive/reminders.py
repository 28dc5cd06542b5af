"""Reminders and timed posts waiting for their time (reminders/ has the rules, reminders/scheduler.py posts them).

The SQL is written once here, in the SQLite dialect both backends take (as in stores.py). Several processes may
share a Postgres archive, and each may find a reminder due: a process posts one only after its claim, a single
conditional UPDATE, has committed. A reminder due once is claimed by setting `delivered_at` where it is still
NULL, a recurring one by moving `due_at` on from the time the claimant read; each claim writes its own token,
so whichever UPDATE committed first is the one whose token is read back, and every other claimant stands down.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from archive import ArchiveWriteFailed, Reminder, ReminderLimits, Shards, Write
from archive.tables import BackendTables
from archive.times import from_ms, to_ms

_COLUMNS = "id, guild_id, channel_id, owner_id, text, due_at, every, post_here, created_at, prompt"
_PENDING = "FROM reminders WHERE delivered_at IS NULL"
# The limits' count claim: the reminder is inserted only if its owner (?4) and its server (?2) have fewer than ?11 and
# ?12 of its kind (a reminder or timed post, or a scheduled prompt: ?10) still to come, counted by the statement that
# inserts (see `Write`'s claim_scope).
_ADD = Write(
    "add_reminder",
    (
        f"INSERT INTO reminders ({_COLUMNS}) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10"
        f" WHERE (SELECT count(*) {_PENDING} AND guild_id = ?2 AND owner_id = ?4 AND prompt = ?10) < ?11"
        f" AND (SELECT count(*) {_PENDING} AND guild_id = ?2 AND prompt = ?10) < ?12",
    ),
    claim_scope=itemgetter(1),
)
_DELETE = Write("delete_reminder", ("DELETE FROM reminders WHERE id = ?",))
_DELETE_MEMBERS = Write("delete_member_reminders", ("DELETE FROM reminders WHERE guild_id = ? AND owner_id = ?",))
_CLAIM_ONCE = Write(
    "claim_reminder_once",
    ("UPDATE reminders SET delivered_at = ?, claim = ? WHERE id = ? AND due_at = ? AND delivered_at IS NULL",),
)
_CLAIM_RECURRING = Write(
    "claim_reminder_recurring",
    ("UPDATE reminders SET due_at = ?, claim = ? WHERE id = ? AND due_at = ? AND delivered_at IS NULL",),
)
# A server's shard, as Discord assigns it: (guild_id >> 22) % SHARD_COUNT
# (https://discord.com/developers/docs/events/gateway#sharding-sharding-formula); a DM's guild 0 is shard 0's.
_SHARD = "(guild_id >> 22) % ?"


class ReminderTables(BackendTables):
    """`archive.ReminderTable` on a backend's queue and read connection."""

    async def new_reminder_id(self) -> int:
        return await self.new_id("reminders")

    async def add_reminder(self, reminder: Reminder, limits: ReminderLimits) -> bool:
        """Store a new reminder if its owner and its server have room under `limits`, in one count claim; whether
        it was stored, once that is committed.

        Raises:
            ArchiveWriteFailed: the writer could not commit it.
        """
        r = reminder
        self._enqueue(
            _ADD,
            (r.id, r.guild_id, r.channel_id, r.owner_id, r.text, to_ms(r.due_at), r.every, r.post_here,
             to_ms(r.created_at), r.prompt, limits.per_member, limits.per_server),
        )  # fmt: skip
        await self.flush()
        if await self.reminder(r.id) is not None:
            return True
        mine, everyone = await self.pending_reminders(r.guild_id, r.owner_id, prompts=r.prompt)
        if mine < limits.per_member and everyone < limits.per_server:
            raise ArchiveWriteFailed("the reminder could not be stored")
        return False

    async def reminder(self, reminder_id: int) -> Reminder | None:
        """A reminder not yet delivered, or None."""
        rows = await self.read(f"SELECT {_COLUMNS} {_PENDING} AND id = ?", (reminder_id,))
        return next(iter(_reminders(rows)), None)

    async def member_reminders(self, guild_id: int, owner_id: int) -> list[Reminder]:
        """The member's reminders in the server that are still to come, soonest first."""
        rows = await self.read(
            f"SELECT {_COLUMNS} {_PENDING} AND guild_id = ? AND owner_id = ? ORDER BY due_at, id", (guild_id, owner_id)
        )
        return _reminders(rows)

    async def pending_reminders(self, guild_id: int, owner_id: int, *, prompts: bool = False) -> tuple[int, int]:
        """How many reminders (or, with `prompts`, scheduled prompts) still to come the member has in the server, and
        the server has."""
        ((mine, everyone),) = await self.read(
            f"SELECT coalesce(sum(CASE WHEN owner_id = ?2 THEN 1 ELSE 0 END), 0), count(*) {_PENDING}"
            " AND guild_id = ?1 AND prompt = ?3",
            (guild_id, owner_id, prompts),
        )
        return int(mine), int(everyone)

    async def scheduled_prompts(self, guild_id: int) -> list[Reminder]:
        """The server's scheduled prompts, soonest first."""
        rows = await self.read(
            f"SELECT {_COLUMNS} {_PENDING} AND guild_id = ? AND prompt = ? ORDER BY due_at, id", (guild_id, True)
        )
        return _reminders(rows)

    async def due_reminders(self, now: datetime, shards: Shards, limit: int) -> list[Reminder]:
        """Up to `limit` reminders of the process's `shards` due by `now`, longest overdue first."""
        where, params = _of_shards(shards)
        rows = await self.read(
            f"SELECT {_COLUMNS} {_PENDING} AND due_at <= ?{where} ORDER BY due_at, id LIMIT ?",
            (to_ms(now), *params, limit),
        )
        return _reminders(rows)

    async def next_reminder_due(self, shards: Shards) -> datetime | None:
        """When the soonest reminder of the process's `shards` comes due; None if there is none."""
        where, params = _of_shards(shards)
        ((soonest,),) = await self.read(f"SELECT min(due_at) {_PENDING}{where}", params)
        return None if soonest is None else from_ms(soonest)

    async def claim_reminder(self, reminder: Reminder, claimant: str, now: datetime, then: datetime | None) -> bool:
        """Claim `reminder`, as read, for delivery by `claimant` (a token of this attempt's own): due once, it is
        marked delivered at `now`; recurring, it moves on to `then`. Whether this claim is the one that stands:
        False if another process's came first, or the reminder was cancelled or moved meanwhile.

        Raises:
            ArchiveWriteFailed: the claim was not committed and the reminder is as it was read (still due).
        """
        due = to_ms(reminder.due_at)
        if then is None:
            self._enqueue(_CLAIM_ONCE, (to_ms(now), claimant, reminder.id, due))
        else:
            self._enqueue(_CLAIM_RECURRING, (to_ms(then), claimant, reminder.id, due))
        await self.flush()
        rows = await self.read("SELECT claim, due_at, delivered_at FROM reminders WHERE id = ?", (reminder.id,))
        if not rows:
            return False  # cancelled (or posted and deleted by another process)
        claim, due_now, delivered = rows[0]
        if claim != claimant and due_now == due and delivered is None:
            raise ArchiveWriteFailed(f"the claim on reminder {reminder.id} could not be stored")
        return bool(claim == claimant)

    async def delete_reminder(self, reminder_id: int) -> None:
        """Delete one reminder (cancelled, or posted); returns once that is committed.

        Raises:
            ArchiveWriteFailed: it is still there.
        """
        self._enqueue(_DELETE, (reminder_id,))
        await self.flush()
        if await self.read("SELECT 1 FROM reminders WHERE id = ?", (reminder_id,)):
            raise ArchiveWriteFailed(f"reminder {reminder_id} could not be deleted")

    async def delete_member_reminders(self, guild_id: int, owner_id: int) -> None:
        """Delete every reminder of the member in the server (they opted out, or erased their data).

        Raises:
            ArchiveWriteFailed: some are still there.
        """
        self._enqueue(_DELETE_MEMBERS, (guild_id, owner_id))
        await self.flush()
        if await self.read("SELECT 1 FROM reminders WHERE guild_id = ? AND owner_id = ?", (guild_id, owner_id)):
            raise ArchiveWriteFailed(f"member {owner_id}'s reminders could not all be deleted")


def _of_shards(shards: Shards) -> tuple[str, tuple[int, ...]]:
    """The condition (and its parameters) that keeps the reminders of servers on `shards`; none for every shard."""
    if shards is None:
        return "", ()
    count, ids = shards
    if not ids:
        return " AND 0 = 1", ()
    return f" AND {_SHARD} IN ({', '.join('?' * len(ids))})", (count, *sorted(ids))


def _reminders(rows: Sequence[Sequence[Any]]) -> list[Reminder]:
    found = []
    for rid, guild, channel, owner, text, due, every, here, created, prompt in rows:
        ids = (int(rid), int(guild), int(channel), int(owner))
        found.append(Reminder(*ids, str(text), from_ms(due), str(every), bool(here), from_ms(created), bool(prompt)))
    return found
