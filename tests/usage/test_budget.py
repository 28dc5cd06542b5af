"""Tests for token accounting (usage/budget.py) and its table in the archive (archive/sqlite.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from freezegun import freeze_time

from archive.backends import open_archive
from archive.sqlite import TokenUsage
from usage.budget import NO_MEMBER, UsageLedger, UsageSummary, next_utc_midnight

NOW = datetime(2026, 3, 10, 15, 30, tzinfo=UTC)
TODAY = NOW.date()
GUILD, OTHER_GUILD = 10, 20
GENERAL, RANDOM = 1, 2
ALICE, BOB, CAROL = 100, 101, 102


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def spend(ledger: UsageLedger) -> None:
    """Alice and Bob in #general, Carol in #random, and someone in another server."""
    ledger.record(GUILD, GENERAL, ALICE, 1000, 200)
    ledger.record(GUILD, GENERAL, ALICE, 500, 100)
    ledger.record(GUILD, GENERAL, BOB, 300, 50)
    ledger.record(GUILD, RANDOM, CAROL, 2000, 400)
    ledger.record(OTHER_GUILD, 3, ALICE, 9000, 900)


def test_memory_ledger_counts_per_server_channel_and_member() -> None:
    """Without the archive the ledger sums each answer's input and output tokens by server, channel and member."""
    ledger = UsageLedger(Clock())
    spend(ledger)
    assert ledger.server_tokens(GUILD) == 1800 + 350 + 2400
    assert ledger.summary(GUILD, GENERAL) == UsageSummary(TODAY, 4550, 2150, [(CAROL, 2400), (ALICE, 1800), (BOB, 350)])
    assert ledger.summary(GUILD, GENERAL, top=1).top_members == [(CAROL, 2400)]
    assert ledger.server_tokens(OTHER_GUILD) == 9900


async def test_a_summary_counts_for_the_server_and_channel_but_no_member() -> None:
    """A summary's tokens go to the server's budget and the channel, are neither an answer nor a judge call, and
    put no one among the top members."""
    ledger = UsageLedger(Clock())
    spend(ledger)
    ledger.record(GUILD, GENERAL, NO_MEMBER, 5000, 300, model="openai:gpt-4.1-nano", kind="summary")
    assert ledger.server_tokens(GUILD) == 4550 + 5300
    summary = ledger.summary(GUILD, GENERAL)
    assert summary.channel_tokens == 2150 + 5300
    assert summary.top_members == [(CAROL, 2400), (ALICE, 1800), (BOB, 350)]
    [row] = [row for row in await ledger.guild_usage(GUILD, 1) if row.member_id == NO_MEMBER]
    assert (row.answers, row.judge_calls, row.total_tokens) == (0, 0, 5300)


def test_a_new_utc_day_starts_from_zero() -> None:
    """At UTC midnight the counts reset; the budget's reset time is that midnight."""
    clock = Clock(datetime(2026, 3, 10, 23, 59, tzinfo=UTC))
    ledger = UsageLedger(clock)
    ledger.record(GUILD, GENERAL, ALICE, 100, 10)
    assert next_utc_midnight(ledger.day) == datetime(2026, 3, 11, tzinfo=UTC)
    clock.now += timedelta(minutes=2)
    assert ledger.server_tokens(GUILD) == 0
    assert ledger.summary(GUILD, GENERAL) == UsageSummary(date(2026, 3, 11), 0, 0, [])


def test_default_clock_is_utc() -> None:
    """The ledger's day is the UTC date, whatever the wall clock's zone."""
    with freeze_time("2026-03-10 23:30:00", tz_offset=-5):
        assert UsageLedger().day == date(2026, 3, 10)


async def test_archived_usage_survives_a_reopen(archive_url: str) -> None:
    """With the archive on, a new ledger on the reopened file starts from today's counts, not from zero."""
    archive = await open_archive(archive_url, retention_days=0)
    ledger = UsageLedger(Clock())
    await ledger.attach(archive)
    spend(ledger)
    await archive.close()

    archive = await open_archive(archive_url, retention_days=0)
    try:
        restarted = UsageLedger(Clock())
        await restarted.attach(archive)
        assert restarted.summary(GUILD, GENERAL) == ledger.summary(GUILD, GENERAL)
        assert restarted.server_tokens(OTHER_GUILD) == 9900
        rows = {(row.channel_id, row.member_id): row for row in await archive.usage_on(TODAY)}
        assert rows[GENERAL, ALICE] == TokenUsage(TODAY, GUILD, GENERAL, ALICE, 1500, 300, answers=2)
        assert await archive.usage_on(TODAY - timedelta(days=1)) == []
    finally:
        await archive.close()


async def test_usage_is_pruned_with_retention_and_dropped_with_its_server(archive_url: str) -> None:
    """Days older than the retention go at prune time; a server Parley leaves takes its counts with it."""
    archive = await open_archive(archive_url, retention_days=7)
    try:
        old = TODAY - timedelta(days=30)
        archive.record_usage(TokenUsage(old, GUILD, GENERAL, ALICE, 10, 1))
        archive.record_usage(TokenUsage(TODAY, GUILD, GENERAL, ALICE, 10, 1))
        archive.record_usage(TokenUsage(TODAY, OTHER_GUILD, 3, BOB, 10, 1))
        await archive.prune(now=NOW)
        assert await archive.usage_on(old) == []
        assert len(await archive.usage_on(TODAY)) == 2
        archive.delete_guild(OTHER_GUILD)
        await archive.flush()
        assert [row.guild_id for row in await archive.usage_on(TODAY)] == [GUILD]
    finally:
        await archive.close()


async def test_deleting_a_channel_keeps_the_servers_spending(archive_url: str) -> None:
    """A deleted channel's counts stay, so deleting a channel cannot refund the server's daily budget."""
    archive = await open_archive(archive_url, retention_days=0)
    try:
        archive.record_usage(TokenUsage(TODAY, GUILD, GENERAL, ALICE, 10, 1))
        archive.delete_channel(GENERAL)
        await archive.flush()
        assert len(await archive.usage_on(TODAY)) == 1
    finally:
        await archive.close()


def test_a_members_day_sums_their_rows_in_that_server_with_the_cost() -> None:
    """/parley status's "your tokens today": every row of theirs in the server (answers and judge calls), priced."""
    ledger = UsageLedger(Clock())
    spend(ledger)
    answer = ledger.record(GUILD, GENERAL, ALICE, 400, 100, model="openai:gpt-4.1-mini")
    ledger.record(GUILD, GENERAL, ALICE, 50, 5, model="openai:gpt-4.1-mini", kind="judge")
    assert answer is not None and (answer.input_tokens, answer.output_tokens, answer.answers) == (400, 100, 1)
    day = ledger.member_today(GUILD, ALICE)
    assert (day.tokens, day.answers, day.judge_calls) == (1800 + 500 + 55, 3, 1)
    # The first rows name no model, so their cost is unknown; the priced rows' is counted.
    assert day.unpriced == {"unknown"} and day.cost > 0
    assert ledger.member_today(OTHER_GUILD, BOB).tokens == 0
    assert ledger.record(GUILD, GENERAL, ALICE, 0, 0) is None
