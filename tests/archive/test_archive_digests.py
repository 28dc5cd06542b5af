"""The digests' table (archive/digests.py), on both backends: a channel's schedule kept across a reopen, gone with
its channel or server, and each period claimed by one claimant only."""

from __future__ import annotations

import asyncio

from archive import Archive, Digest
from archive.backends import open_archive
from tests.conftest import fresh_postgres_database
from tests.support.archive_contract_support import CHANNEL, GUILD, OTHER_CHANNEL

DAILY_AT_9 = Digest(CHANNEL, GUILD, "daily", 9, 0, 1_000, "", 100, 500)
NEXT = 2_000  # the next period: the moment its digest is due, in ms


async def test_a_digest_is_kept_replaced_and_cleared_across_a_reopen(archive_url: str) -> None:
    archive = await open_archive(archive_url, retention_days=0)
    try:
        assert await archive.digests() == [] and await archive.digest(CHANNEL) is None
        await archive.set_digest(DAILY_AT_9)
        weekly = Digest(OTHER_CHANNEL, GUILD, "weekly", 18, 4, 1_500, "", 101, 600)
        await archive.set_digest(weekly)
    finally:
        await archive.close()
    archive = await open_archive(archive_url, retention_days=0)
    try:
        assert await archive.digests() == [DAILY_AT_9, weekly]
        later = DAILY_AT_9._replace(hour=17, last_period=1_200, set_by=101)
        await archive.set_digest(later)
        assert await archive.digest(CHANNEL) == later
        await archive.clear_digest(CHANNEL)
        assert await archive.digests() == [weekly]
    finally:
        await archive.close()


async def test_a_period_is_claimed_once_and_only_after_the_last(archive: Archive) -> None:
    """Of two claimants of one period the first stands; an earlier or the same period is never claimed again; a later
    one is; a schedule that changed since it was read, or a digest turned off, claims nothing."""
    await archive.set_digest(DAILY_AT_9)
    first, second = await asyncio.gather(
        archive.claim_digest(DAILY_AT_9, NEXT, "one"), archive.claim_digest(DAILY_AT_9, NEXT, "two")
    )
    assert (first, second) == (True, False)
    assert await archive.claim_digest(DAILY_AT_9, NEXT, "two") is False
    assert await archive.claim_digest(DAILY_AT_9, NEXT - 1, "two") is False
    stored = await archive.digest(CHANNEL)
    assert stored is not None and (stored.last_period, stored.claimant) == (NEXT, "one")
    assert await archive.claim_digest(DAILY_AT_9, NEXT + 1, "two") is True

    read_before_a_change = DAILY_AT_9
    await archive.set_digest(DAILY_AT_9._replace(hour=17))
    assert await archive.claim_digest(read_before_a_change, NEXT + 2, "one") is False
    await archive.clear_digest(CHANNEL)
    assert await archive.claim_digest(read_before_a_change, NEXT + 3, "one") is False


async def test_a_claimed_period_is_given_back_only_by_its_claimant_while_it_stands(archive: Archive) -> None:
    await archive.set_digest(DAILY_AT_9)
    assert await archive.claim_digest(DAILY_AT_9, NEXT, "one")
    await archive.release_digest(DAILY_AT_9, NEXT, "two")  # not its claim: nothing
    stored = await archive.digest(CHANNEL)
    assert stored is not None and stored.last_period == NEXT
    await archive.release_digest(DAILY_AT_9, NEXT, "one")
    stored = await archive.digest(CHANNEL)
    assert stored is not None and stored.last_period == DAILY_AT_9.last_period
    assert await archive.claim_digest(DAILY_AT_9, NEXT, "two")  # the next tick takes it up again
    assert await archive.claim_digest(DAILY_AT_9, NEXT + 1, "one")
    await archive.release_digest(DAILY_AT_9, NEXT, "two")  # a later period was claimed since: nothing
    stored = await archive.digest(CHANNEL)
    assert stored is not None and stored.last_period == NEXT + 1


async def test_a_digest_goes_with_its_channel_and_its_server(archive: Archive) -> None:
    await archive.set_digest(DAILY_AT_9)
    await archive.set_digest(DAILY_AT_9._replace(channel_id=OTHER_CHANNEL))
    await archive.set_digest(DAILY_AT_9._replace(channel_id=77, guild_id=GUILD + 1))
    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert [digest.channel_id for digest in await archive.digests()] == [OTHER_CHANNEL, 77]
    archive.delete_guild(GUILD)
    await archive.flush()
    assert [digest.channel_id for digest in await archive.digests()] == [77]


async def test_processes_sharing_a_postgres_archive_claim_each_period_once(postgres_server: str) -> None:
    """Two archives on one Postgres database (two processes) claiming the same periods at once: each period goes
    to exactly one of them."""
    url = await fresh_postgres_database(postgres_server)
    archives = [await open_archive(url) for _ in range(2)]
    try:
        await archives[0].set_digest(DAILY_AT_9)
        for period in range(NEXT, NEXT + 10):
            won = await asyncio.gather(
                *(archive.claim_digest(DAILY_AT_9, period, f"process {n}") for n, archive in enumerate(archives))
            )
            assert won.count(True) == 1, (period, won)
    finally:
        for archive in archives:
            await archive.close()
