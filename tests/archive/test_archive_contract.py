"""Tests for the channel archive: each on both backends (archive_url), SQLite's own file checks apart."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

from archive import ReconciliationProgress
from archive.backends import open_archive
from archive.exclusive import FileClaim
from archive.sqlite import SQLiteArchive
from tests.conftest import fresh_postgres_database
from tests.support.archive_contract_support import (
    CHANNEL,
    NOW,
    OTHER_CHANNEL,
    fts_integrity_check,
    fts_rowids,
    ids,
    msg,
)


async def test_round_trip_add_flush_recent(archive: SQLiteArchive) -> None:
    """Added messages come back from recent() field for field, oldest first."""
    first = msg(1, "hello there", minutes_ago=5, reply_to_message_id=None)
    second = msg(2, "general kenobi", minutes_ago=1, author="bob", author_id=101, reply_to_message_id=1, edited_at=NOW)
    archive.add(second)
    archive.add(first)
    await archive.flush()

    assert await archive.recent(CHANNEL) == [first, second]
    assert (await archive.recent(CHANNEL))[0].created_at.tzinfo is not None


async def test_recent_limit_hours_before(archive: SQLiteArchive) -> None:
    """recent() returns the latest `limit` in order and honours hours and before_id."""
    for i in range(10):
        archive.add(msg(i + 1, f"message {i}", minutes_ago=100 - i * 10))
    archive.add(msg(99, "elsewhere", channel=OTHER_CHANNEL))
    await archive.flush()

    assert ids(await archive.recent(CHANNEL, limit=3)) == [8, 9, 10]
    assert ids(await archive.recent(CHANNEL, hours=0.5, now=NOW)) == [8, 9, 10]
    assert ids(await archive.recent(CHANNEL, limit=2, before_id=8)) == [6, 7]
    assert await archive.recent(CHANNEL, limit=0) == []
    assert await archive.recent(12345) == []


async def test_reads_see_commits_without_flush(archive_url: str) -> None:
    """The writer commits on its own within flush_interval."""
    archive = await open_archive(archive_url, retention_days=0, flush_interval=0.02)
    try:
        archive.add(msg(1, "autocommitted"))
        for _ in range(100):
            if await archive.recent(CHANNEL):
                break
            await asyncio.sleep(0.01)
        assert ids(await archive.recent(CHANNEL)) == [1]
    finally:
        await archive.close()


async def test_search_ranks_and_stays_in_channel(archive: SQLiteArchive) -> None:
    """Better bm25 matches come first, ties newest first, other channels never leak in."""
    archive.add(msg(1, "we should deploy the service after lunch if the tests pass today", minutes_ago=30))
    archive.add(msg(2, "deploy deploy deploy", minutes_ago=20))
    archive.add(msg(3, "unrelated chatter about cats", minutes_ago=10))
    archive.add(msg(4, "deploy deploy deploy", minutes_ago=5))
    archive.add(msg(5, "deploy deploy deploy", channel=OTHER_CHANNEL, guild=11))
    await archive.flush()

    found = await archive.search(CHANNEL, "deploy")
    assert ids(found) == [4, 2, 1]
    assert all(m.channel_id == CHANNEL for m in found)
    assert ids(await archive.search(OTHER_CHANNEL, "DEPLOY")) == [5]
    assert ids(await archive.search(CHANNEL, "deploy", limit=1)) == [4]


async def test_search_and_then_or(archive: SQLiteArchive) -> None:
    """All words must match; if nothing does, any word may."""
    archive.add(msg(1, "alpha beta", minutes_ago=3))
    archive.add(msg(2, "alpha only", minutes_ago=2))
    archive.add(msg(3, "beta only", minutes_ago=1))
    await archive.flush()

    assert ids(await archive.search(CHANNEL, "beta alpha")) == [1]
    assert sorted(ids(await archive.search(CHANNEL, "alpha zulu"))) == [1, 2]
    assert await archive.search(CHANNEL, "zulu yankee") == []


async def test_search_ignores_stopwords_unless_alone(archive: SQLiteArchive) -> None:
    """Question-style queries match on their content words; a lone stopword still searches."""
    archive.add(msg(1, "deploy went fine"))
    archive.add(msg(2, "the end"))
    await archive.flush()

    assert ids(await archive.search(CHANNEL, "What did we decide about the deploy?")) == [1]
    assert ids(await archive.search(CHANNEL, "the")) == [2]


async def test_search_hours_window(archive: SQLiteArchive) -> None:
    """hours restricts search to recent messages relative to now."""
    archive.add(msg(1, "release notes", minutes_ago=60 * 30))
    archive.add(msg(2, "release party", minutes_ago=60))
    await archive.flush()

    assert ids(await archive.search(CHANNEL, "release", hours=24, now=NOW)) == [2]
    assert await archive.search(CHANNEL, "release", hours=24, now=NOW + timedelta(days=3)) == []
    assert len(await archive.search(CHANNEL, "release", hours=10**9, now=NOW)) == 2


@pytest.mark.parametrize(
    "query",
    [
        '"a AND (b',
        "NEAR*",
        "NEAR(a b)",
        "col:x",
        "content:release",
        'unbalanced "quote',
        '""',
        "",
        "   ",
        "?!.,;()*^-+",
        "a OR b NOT c",
        "{content} : x",
        "x' OR 1=1; DROP TABLE messages; --",
        "ünïcödé 🙂 日本語",
        "word " * 200,
    ],
)
async def test_search_hostile_queries(archive: SQLiteArchive, query: str) -> None:
    """User text is never FTS syntax: odd queries give normal results, no errors."""
    archive.add(msg(1, "release content x b"))
    await archive.flush()

    found = await archive.search(CHANNEL, query)

    assert isinstance(found, list)
    assert ids(await archive.search(CHANNEL, "release")) == [1]


async def test_search_matches_words_inside_punctuation(archive: SQLiteArchive) -> None:
    """Punctuated input still finds the words in it."""
    archive.add(msg(1, "ship it: v2.0 is out (finally)"))
    await archive.flush()

    assert ids(await archive.search(CHANNEL, '"finally"!')) == [1]
    assert ids(await archive.search(CHANNEL, "col:ship")) == [1]


async def test_edit_updates_search(archive: SQLiteArchive, db_path: Path) -> None:
    """After an edit, the new text is found and the old text is not."""
    archive.add(msg(1, "original wording"))
    archive.edit(1, "corrected phrasing", NOW + timedelta(minutes=1))
    archive.edit(404, "not archived", NOW)
    await archive.flush()

    assert await archive.search(CHANNEL, "original") == []
    (edited,) = await archive.search(CHANNEL, "corrected")
    assert edited.content == "corrected phrasing"
    assert edited.edited_at == NOW + timedelta(minutes=1)
    if isinstance(archive, SQLiteArchive):
        assert fts_rowids(db_path, "original") == []
        fts_integrity_check(db_path)


async def test_re_adding_a_message_replaces_it(archive: SQLiteArchive, db_path: Path) -> None:
    """add() of a known id replaces the stored message and its index entry."""
    archive.add(msg(1, "first draft"))
    await archive.flush()
    archive.add(msg(1, "second draft", author="alice renamed"))
    archive.add(msg(1, "final draft", author="alice renamed"))
    await archive.flush()

    assert [m.content for m in await archive.recent(CHANNEL)] == ["final draft"]
    assert await archive.search(CHANNEL, "first") == []
    assert await archive.search(CHANNEL, "second") == []
    if isinstance(archive, SQLiteArchive):
        assert len(fts_rowids(db_path, "draft")) == 1
        fts_integrity_check(db_path)


async def test_order_is_preserved_add_then_delete(archive: SQLiteArchive) -> None:
    """An add followed by a delete of the same id ends deleted, and vice versa."""
    archive.add(msg(1, "short lived"))
    archive.delete([1])
    archive.delete([2])
    archive.add(msg(2, "came back"))
    await archive.flush()

    assert ids(await archive.recent(CHANNEL)) == [2]


async def test_deletes_remove_rows_and_index_entries(archive: SQLiteArchive, db_path: Path) -> None:
    """delete, bulk delete, delete_channel and delete_guild remove rows and FTS entries."""
    for i in range(1, 6):
        archive.add(msg(i, f"topic{i} shared"))
    archive.add(msg(10, "shared in two", channel=2, guild=20))
    archive.add(msg(11, "shared in three", channel=3, guild=30))
    archive.add(msg(12, "shared in four", channel=4, guild=30))
    await archive.flush()
    sqlite = isinstance(archive, SQLiteArchive)
    assert not sqlite or len(fts_rowids(db_path, "shared")) == 8

    archive.delete([1])
    archive.delete(iter([2, 3, 999]))
    await archive.flush()
    assert ids(await archive.recent(CHANNEL)) == [4, 5]
    assert await archive.search(CHANNEL, "topic1") == await archive.search(CHANNEL, "topic3") == []
    assert not sqlite or fts_rowids(db_path, "topic1") == fts_rowids(db_path, "topic3") == []

    archive.delete_channel(2)
    archive.delete_guild(30)
    await archive.flush()
    assert await archive.recent(2) == await archive.recent(3) == await archive.recent(4) == []
    assert await archive.search(3, "shared") == await archive.search(4, "shared") == []
    assert ids(await archive.search(CHANNEL, "shared")) == [5, 4]
    if sqlite:
        assert len(fts_rowids(db_path, "shared")) == 2
        fts_integrity_check(db_path)


async def test_prune_retention(archive_url: str, db_path: Path) -> None:
    """prune() drops messages and decisions older than retention_days."""
    archive = await open_archive(archive_url, retention_days=7)
    try:
        archive.add(msg(1, "ancient", minutes_ago=8 * 24 * 60))
        archive.add(msg(2, "recent", minutes_ago=6 * 24 * 60))
        archive.record_decision(
            channel_id=CHANNEL,
            message_id=1,
            author_name="alice",
            excerpt="ancient",
            responded=False,
            reason="old",
            tier="fast",
            decided_at=NOW - timedelta(days=8),
        )
        assert await archive.claim_message(1, "earlier process", NOW - timedelta(days=8))
        await archive.flush()

        assert await archive.prune(now=NOW) == 1
        assert ids(await archive.recent(CHANNEL)) == [2]
        assert await archive.recent_decisions(CHANNEL) == []
        assert await archive.claim_message(1, "this process", NOW)  # the old claim went with the retention
        assert await archive.search(CHANNEL, "ancient") == []
        assert await archive.prune(now=NOW) == 0
    finally:
        await archive.close()
    if archive_url.startswith("sqlite"):
        fts_integrity_check(db_path)


async def test_prune_zero_retention_keeps_everything(archive: SQLiteArchive) -> None:
    """retention_days=0 never prunes."""
    archive.add(msg(1, "from long ago", minutes_ago=10 * 365 * 24 * 60))
    await archive.flush()

    assert await archive.prune(now=NOW) == 0
    assert ids(await archive.recent(CHANNEL)) == [1]


async def test_prune_defaults_to_current_time_and_runs_at_open(archive_url: str) -> None:
    """prune() reads the clock at call time (frozen here), and open() prunes too."""
    with freeze_time(NOW, real_asyncio=True):
        archive = await open_archive(archive_url, retention_days=7)
        archive.add(msg(1, "old", minutes_ago=8 * 24 * 60))
        archive.add(msg(2, "fresh", minutes_ago=60))
        await archive.flush()
        assert await archive.prune() == 1
        archive.add(msg(3, "old again", minutes_ago=8 * 24 * 60))
        await archive.close()

        archive = await open_archive(archive_url, retention_days=7)
        await archive.flush()
        assert ids(await archive.recent(CHANNEL)) == [2]
        await archive.close()


async def test_periodic_prune(archive_url: str) -> None:
    """The writer prunes on its own every prune_interval."""
    archive = await open_archive(archive_url, retention_days=1, prune_interval=0.02, flush_interval=0.01)
    try:
        archive.add(msg(1, "stale"))  # NOW lies far more than a day in the real past
        await archive.flush()
        for _ in range(200):
            if not await archive.recent(CHANNEL):
                break
            await asyncio.sleep(0.01)
        assert await archive.recent(CHANNEL) == []
    finally:
        await archive.close()


async def test_close_flushes_pending_writes(archive_url: str, db_path: Path) -> None:
    """Writes queued right before close() are stored after reopening."""
    archive = await open_archive(archive_url, retention_days=0, flush_interval=60)
    for i in range(1, 2501):
        archive.add(msg(i, f"note {i}", channel=1 + i % 3))
    archive.record_decision(
        channel_id=CHANNEL,
        message_id=1,
        author_name="alice",
        excerpt="note 1",
        responded=True,
        reason="asked",
        tier="full",
    )
    await archive.close()

    archive = await open_archive(archive_url, retention_days=0)
    try:
        assert len(await archive.recent(CHANNEL, limit=5000)) == 833
        assert len(await archive.recent_decisions(CHANNEL)) == 1
        # Search keys resume above the stored ones after a restart.
        archive.add(msg(5000, "after restart"))
        archive.add(msg(5001, "after restart", channel=99))
        await archive.flush()
        assert ids(await archive.search(CHANNEL, "restart")) == [5000]
        assert ids(await archive.search(CHANNEL, "note", limit=1000))[-1] in range(1, 2501)
    finally:
        await archive.close()
    if archive_url.startswith("sqlite"):
        fts_integrity_check(db_path)


async def test_writes_after_close_are_refused(archive_url: str) -> None:
    """A closed archive raises instead of silently dropping writes; close is idempotent."""
    archive = await open_archive(archive_url)
    await archive.close()
    await archive.close()
    with pytest.raises(RuntimeError):
        archive.add(msg(1, "too late"))


async def test_failing_batch_is_logged_and_writer_survives(
    archive: SQLiteArchive, caplog: pytest.LogCaptureFixture
) -> None:
    """A bad write is logged and dropped alone; the writer keeps going."""
    archive.add(msg(1, "good before"))
    archive.add(msg(2, None))  # type: ignore[arg-type]  # NOT NULL violation
    archive.add(msg(3, "good after"))
    with caplog.at_level(logging.ERROR, logger="archive"):
        await archive.flush()

    assert ids(await archive.recent(CHANNEL)) == [1, 3]
    assert any("dropped add write" in r.getMessage() for r in caplog.records)

    archive.add(msg(4, "still writing"))
    await archive.flush()
    assert ids(await archive.recent(CHANNEL)) == [1, 3, 4]


async def test_pending_writes(archive: SQLiteArchive) -> None:
    """pending_writes counts queued writes until they are committed."""
    archive.add(msg(1, "queued"))
    archive.delete([7, 8])
    assert archive.pending_writes == 3
    await archive.flush()
    assert archive.pending_writes == 0


async def test_reconciliation_progress_round_trip(archive: SQLiteArchive) -> None:
    """Each channel's recheck progress is kept, replaced whole, and goes with its channel or server."""
    assert await archive.reconciliation_progress() == {}
    started = ReconciliationProgress(CHANNEL, 30, upto_id=9_000, reached_id=9_000)
    elsewhere = ReconciliationProgress(OTHER_CHANNEL, 31, upto_id=8_000, reached_id=0)
    await archive.save_reconciliation_progress(started)
    await archive.save_reconciliation_progress(elsewhere)
    assert await archive.reconciliation_progress() == {CHANNEL: started, OTHER_CHANNEL: elsewhere}
    assert elsewhere.done and not started.done

    moved_on = ReconciliationProgress(CHANNEL, 30, upto_id=9_000, reached_id=4_000, again_id=12_000)
    await archive.save_reconciliation_progress(moved_on)
    assert (await archive.reconciliation_progress())[CHANNEL] == moved_on
    assert not ReconciliationProgress(CHANNEL, 30, upto_id=9_000, reached_id=0, again_id=12_000).done

    archive.delete_channel(CHANNEL)
    await archive.flush()
    assert await archive.reconciliation_progress() == {OTHER_CHANNEL: elsewhere}
    archive.delete_guild(31)
    await archive.flush()
    assert await archive.reconciliation_progress() == {}


async def test_a_message_is_claimed_by_one_claimant_only(archive: SQLiteArchive) -> None:
    """Of two claims on one message in the same batch, the first stands; its claimant keeps it, the other never
    gets it, and another message is claimed apart."""
    first, second = await asyncio.gather(
        archive.claim_message(7, "one", NOW), archive.claim_message(7, "two", NOW - timedelta(minutes=1))
    )
    assert (first, second) == (True, False)
    assert await archive.claim_message(7, "one", NOW) is True
    assert await archive.claim_message(7, "two", NOW) is False
    assert await archive.claim_message(8, "two", NOW) is True


async def test_a_released_claim_is_the_next_claimants_and_another_claimants_stays(archive: SQLiteArchive) -> None:
    """A claimant gives back its claim (its take-up failed): the next claimant gets the message; a claimant cannot
    give back a claim that is not its own."""
    assert await archive.claim_message(7, "one", NOW) is True
    await archive.release_message(7, "one")
    assert await archive.claim_message(7, "two", NOW) is True
    await archive.release_message(7, "one")
    assert await archive.claim_message(7, "one", NOW) is False


async def test_the_sole_process_of_a_sqlite_archive_claims_new_messages_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite archive this process holds the lock of (no other writes it) answers a claim on a message newer than
    every claim at once, without a round trip; it still keeps every claim's rules: one claimant per message, a claim
    given back is the next one's, an earlier run's claims stand (an older message goes the round trip), and the new
    claims are committed for the next run."""
    database = tmp_path / "parley.db"
    archive = await SQLiteArchive.open(database, retention_days=0, claim=FileClaim.take(database))
    try:
        assert await archive.claim_message(7, "earlier run", NOW) is True
    finally:
        await archive.close()
    archive = await SQLiteArchive.open(database, retention_days=0, claim=FileClaim.take(database))
    try:
        reads = 0
        read = archive.read

        async def counted(*args: Any) -> list[tuple[Any, ...]]:
            nonlocal reads
            reads += 1
            return await read(*args)

        monkeypatch.setattr(archive, "read", counted)
        assert await archive.claim_message(7, "this run", NOW) is False  # the earlier run's claim stands
        reads_before = reads
        first, second = await asyncio.gather(archive.claim_message(9, "one", NOW), archive.claim_message(9, "two", NOW))
        assert (first, second) == (True, False)
        assert await archive.claim_message(10, "two", NOW) is True
        assert reads - reads_before == 1  # the second claimant's: none for a new message's first claim
        await archive.release_message(9, "one")
        assert await archive.claim_message(9, "two", NOW) is True
    finally:
        await archive.close()
    archive = await SQLiteArchive.open(database, retention_days=0)
    try:
        assert [await archive.claim_message(m, "next run", NOW) for m in (9, 10)] == [False, False]
    finally:
        await archive.close()


async def test_a_sole_processs_claim_commits_with_the_next_batch(tmp_path: Path) -> None:
    """A claim that needs no round trip does not wake the writer: its batch (the conversation's snapshot too) would
    be made ready while the answer's model request is built (bench/bench_bot.py). It is committed with the writer's
    next batch or an earlier flush, and close commits it too."""
    database = tmp_path / "parley.db"
    archive = await SQLiteArchive.open(database, retention_days=0, claim=FileClaim.take(database), flush_interval=60)
    try:
        assert await archive.claim_message(7, "this run", NOW) is True
        assert not archive._wake.is_set()  # no commit asked for: the next batch takes it
        assert archive.pending_writes == 1
        assert await archive.read("SELECT claimant FROM message_claims") == []
        await archive.flush()
        assert await archive.read("SELECT claimant FROM message_claims") == [("this run",)]
        assert await archive.claim_message(8, "this run", NOW) is True
    finally:
        await archive.close()
    archive = await SQLiteArchive.open(database, retention_days=0)
    try:
        assert await archive.claim_message(8, "next run", NOW) is False
    finally:
        await archive.close()


async def test_processes_sharing_a_postgres_archive_claim_each_message_once(postgres_server: str) -> None:
    """Two archives on one Postgres database (two processes) claiming the same messages at once: each message
    goes to exactly one of them."""
    url = await fresh_postgres_database(postgres_server)
    archives = [await open_archive(url) for _ in range(2)]
    try:
        claims = [(message_id, archive) for message_id in range(1, 21) for archive in archives]
        # Claimed now: a claim older than the retention (90 days here) may be pruned by then.
        now = datetime.now(UTC)
        won = await asyncio.gather(*(archive.claim_message(m, f"process {id(archive)}", now) for m, archive in claims))
    finally:
        for archive in archives:
            await archive.close()
    for message_id in range(1, 21):
        assert [held for (m, _), held in zip(claims, won, strict=True) if m == message_id].count(True) == 1
