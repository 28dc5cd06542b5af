"""Contract tests for reminders in the archive (archive/reminders.py): storing, listing, counting, the due
reminders of a process's shards, and the claim that lets one process alone post each; on both backends."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from archive import Archive, Reminder, ReminderLimits
from archive.backends import open_archive
from tests.conftest import fresh_postgres_database
from tests.support.archive_contract_support import NOW

GUILD, OTHER_GUILD = 10, 11 << 22  # OTHER_GUILD is on shard 1 of 2, GUILD on shard 0
ALICE, BOB = 100, 200
ROOM = ReminderLimits(per_member=100, per_server=100)


def reminder(rid: int, *, guild: int = GUILD, owner: int = ALICE, minutes: int = 10, every: str = "") -> Reminder:
    return Reminder(rid, guild, 500, owner, f"reminder {rid}", NOW + timedelta(minutes=minutes), every, False, NOW)


async def test_a_reminder_is_stored_listed_counted_and_deleted(archive: Archive) -> None:
    """What is added comes back field for field; a member's list is theirs in that server, soonest first; the
    counts are the member's and the server's pending ones."""
    first = await archive.new_reminder_id()
    second = await archive.new_reminder_id()
    assert second > first
    later = reminder(first, minutes=30)
    sooner = Reminder(second, GUILD, 501, ALICE, "two\nlines", NOW + timedelta(minutes=5), "daily", True, NOW)
    for each in (later, sooner, reminder(50, owner=BOB), reminder(51, guild=OTHER_GUILD)):
        await archive.add_reminder(each, ROOM)

    assert await archive.reminder(second) == sooner
    assert await archive.member_reminders(GUILD, ALICE) == [sooner, later]
    assert await archive.pending_reminders(GUILD, ALICE) == (2, 3)
    assert await archive.pending_reminders(GUILD, 999) == (0, 3)

    await archive.delete_reminder(first)
    assert await archive.reminder(first) is None
    await archive.delete_member_reminders(GUILD, ALICE)
    assert await archive.member_reminders(GUILD, ALICE) == []
    assert await archive.pending_reminders(GUILD, BOB) == (1, 1)


async def test_a_reminder_is_stored_only_under_both_limits(archive: Archive) -> None:
    """The count claim: a reminder past its owner's or its server's limit is not stored (False), and one that came
    due and was delivered no longer counts."""
    limits = ReminderLimits(per_member=2, per_server=3)
    assert [await archive.add_reminder(reminder(rid), limits) for rid in (1, 2, 3)] == [True, True, False]
    assert await archive.add_reminder(reminder(4, owner=BOB), limits)
    assert not await archive.add_reminder(reminder(5, owner=BOB), limits)
    assert await archive.add_reminder(reminder(6, guild=OTHER_GUILD), limits)
    assert await archive.pending_reminders(GUILD, ALICE) == (2, 3)
    assert await archive.claim_reminder(reminder(1), "posted", NOW, None)
    assert await archive.add_reminder(reminder(7), limits)
    assert await archive.reminder(3) is None and await archive.reminder(5) is None


async def test_due_reminders_are_those_of_the_process_shards_longest_overdue_first(archive: Archive) -> None:
    """A process reads only its shards' due reminders (a DM's guild 0 is shard 0's), and its next time only from
    them, so another shard's overdue reminder never keeps it awake."""
    for each in (
        reminder(1, minutes=-5),
        reminder(2, minutes=-20),
        reminder(3, guild=OTHER_GUILD, minutes=-30),
        reminder(4, guild=0, minutes=-1),
        reminder(5, minutes=60),
    ):
        await archive.add_reminder(each, ROOM)

    assert [r.id for r in await archive.due_reminders(NOW, None, 10)] == [3, 2, 1, 4]
    assert [r.id for r in await archive.due_reminders(NOW, (2, frozenset({0})), 10)] == [2, 1, 4]
    assert [r.id for r in await archive.due_reminders(NOW, (2, frozenset({1})), 10)] == [3]
    assert [r.id for r in await archive.due_reminders(NOW, None, 2)] == [3, 2]
    assert await archive.next_reminder_due((2, frozenset({0}))) == NOW - timedelta(minutes=20)
    assert await archive.next_reminder_due((2, frozenset())) is None


async def test_a_one_off_is_claimed_once_and_then_is_no_longer_due(archive: Archive) -> None:
    """Of two claims on a one-off as read, the first stands; it is then neither due, listed nor counted."""
    due = reminder(1, minutes=-1)
    await archive.add_reminder(due, ROOM)

    assert await archive.claim_reminder(due, "first", NOW, None)
    assert not await archive.claim_reminder(due, "second", NOW, None)
    assert await archive.due_reminders(NOW, None, 10) == []
    assert await archive.member_reminders(GUILD, ALICE) == []
    assert await archive.pending_reminders(GUILD, ALICE) == (0, 0)


async def test_a_recurring_reminder_claimed_moves_on_and_a_stale_claim_fails(archive: Archive) -> None:
    """A recurring claim moves the reminder to its next time; a claim on it as it was read before fails, and one on
    a cancelled reminder fails too."""
    due = reminder(1, minutes=-1, every="daily")
    await archive.add_reminder(due, ROOM)
    then = due.due_at + timedelta(days=1)

    assert await archive.claim_reminder(due, "first", NOW, then)
    assert not await archive.claim_reminder(due, "second", NOW, then)
    moved = await archive.reminder(1)
    assert moved is not None and moved.due_at == then
    assert await archive.due_reminders(NOW, None, 10) == []
    await archive.delete_reminder(1)
    assert not await archive.claim_reminder(moved, "third", NOW, then + timedelta(days=1))


async def test_two_processes_on_one_postgres_claim_a_reminder_once(postgres_server: str) -> None:
    """Two archives on one Postgres database claim the same due reminders at once: each is claimed exactly once."""
    url = await fresh_postgres_database(postgres_server)
    first = await open_archive(url, retention_days=0)
    second = await open_archive(url, retention_days=0)
    try:
        due = [reminder(await first.new_reminder_id(), minutes=-1) for _ in range(20)]
        for each in due:
            await first.add_reminder(each, ROOM)
        claims = await asyncio.gather(
            *(archive.claim_reminder(each, name, NOW, None) for each in due for archive, name in
              ((first, "first"), (second, "second")))
        )  # fmt: skip
        assert [claims[i] + claims[i + 1] for i in range(0, len(claims), 2)] == [1] * len(due)
    finally:
        await first.close()
        await second.close()
