"""When a digest is due and what its period covers (upkeep/digests.py), in TIMEZONE and across a change of the
clocks; and what its post says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from archive import ArchivedMessage, Digest
from catchup.reading import Range
from catchup.writing import Point, Summary
from upkeep.digests import describe_digest, latest_due, next_due, period_of, period_start, schedule_text

PARIS = ZoneInfo("Europe/Paris")
DAILY_AT_9 = Digest(1, 10, "daily", 9, 0, 0, "", 100, 0)
WEEKLY_FRIDAY_18 = Digest(1, 10, "weekly", 18, 4, 0, "", 100, 0)


def paris(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=PARIS)


@pytest.mark.parametrize(
    ("now", "latest", "following"),
    [
        (paris(2026, 11, 25, 8, 59), paris(2026, 11, 24, 9), paris(2026, 11, 25, 9)),
        (paris(2026, 11, 25, 9, 0), paris(2026, 11, 25, 9), paris(2026, 11, 26, 9)),
        (paris(2026, 11, 25, 23, 30), paris(2026, 11, 25, 9), paris(2026, 11, 26, 9)),
    ],
)
def test_a_daily_digest_is_due_at_its_hour_in_the_zone(now: datetime, latest: datetime, following: datetime) -> None:
    # Read in UTC as the clock gives it: 08:59 in Paris is 07:59 UTC.
    utc = now.astimezone(UTC)
    assert latest_due(DAILY_AT_9, utc, PARIS) == latest
    assert next_due(DAILY_AT_9, utc, PARIS) == following


@pytest.mark.parametrize(
    ("now", "latest"),
    [
        (paris(2026, 11, 27, 18, 0), paris(2026, 11, 27, 18)),  # Friday at the hour
        (paris(2026, 11, 27, 17, 59), paris(2026, 11, 20, 18)),  # Friday, before it: the week before
        (paris(2026, 11, 25, 12, 0), paris(2026, 11, 20, 18)),  # Wednesday
    ],
)
def test_a_weekly_digest_is_due_on_its_weekday(now: datetime, latest: datetime) -> None:
    assert latest_due(WEEKLY_FRIDAY_18, now, PARIS) == latest
    assert next_due(WEEKLY_FRIDAY_18, now, PARIS) == latest + timedelta(days=7)
    assert period_start(WEEKLY_FRIDAY_18, latest, PARIS) == latest - timedelta(days=7)


def test_a_period_across_a_change_of_the_clocks_is_a_calendar_day() -> None:
    """On 29 March 2026 Paris moves from UTC+1 to UTC+2: that day's digest covers 23 hours, 9:00 to 9:00."""
    due = latest_due(DAILY_AT_9, paris(2026, 3, 29, 12), PARIS)
    start = period_start(DAILY_AT_9, due, PARIS)
    assert (due, start) == (paris(2026, 3, 29, 9), paris(2026, 3, 28, 9))
    assert due - start == timedelta(hours=23)
    assert period_of(due) > period_of(start)


def test_the_schedule_reads_as_said() -> None:
    assert schedule_text(DAILY_AT_9, PARIS) == "daily at 09:00 (Europe/Paris)"
    assert schedule_text(WEEKLY_FRIDAY_18, ZoneInfo("UTC")) == "weekly on Friday at 18:00 (UTC)"


def said(message_id: int, content: str) -> ArchivedMessage:
    return ArchivedMessage(message_id, 10, 1, 100, "alice", content, paris(2026, 11, 25, 8), is_bot=False)


def test_a_digest_post_links_its_points_by_topic_and_says_when_it_is_late() -> None:
    messages = [said(11, "the release is friday"), said(12, "@everyone review please?")]
    summary = Summary([Point("Release", "Alice set the release for friday.", 11)], chunks=1, reused=0, left_out=0)
    start, due = paris(2026, 11, 24, 9), paris(2026, 11, 25, 9)

    on_time = describe_digest(DAILY_AT_9, summary, Range(messages, more=False), start, late_since=None)
    assert on_time.splitlines() == [
        f"**Daily digest: 2 messages since <t:{int(start.timestamp())}:f>.**",
        "",
        "**Release**",
        "- Alice set the release for friday. [jump](https://discord.com/channels/10/1/11)",
    ]
    late = describe_digest(DAILY_AT_9, summary, Range(messages, more=True), start, late_since=due)
    assert "Only the newest" in late
    assert late.endswith(f"Posted late: Parley was not running when it was due, <t:{int(due.timestamp())}:R>.")
