"""Schedules in members' words (`/parley-admin schedule add`): each form's first time and recurrence, read in the
deploy's zone, and the one line that refuses anything else."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from reminders.when import TimeError, parse_schedule

PARIS = ZoneInfo("Europe/Paris")
# A Saturday, 11:00 in Paris.
NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("words", "first", "every"),
    [
        ("every monday 9:00", datetime(2026, 11, 30, 9, 0, tzinfo=PARIS), "weekly"),
        ("Mondays 9am", datetime(2026, 11, 30, 9, 0, tzinfo=PARIS), "weekly"),
        ("weekly friday 17:00", datetime(2026, 12, 4, 17, 0, tzinfo=PARIS), "weekly"),
        ("daily 18:00", datetime(2026, 11, 28, 18, 0, tzinfo=PARIS), "daily"),
        ("every day at 7:15", datetime(2026, 11, 29, 7, 15, tzinfo=PARIS), "daily"),
        # A weekdays schedule set on a Saturday first comes on Monday.
        ("weekdays 8:30", datetime(2026, 11, 30, 8, 30, tzinfo=PARIS), "weekdays"),
        ("every 6h", datetime(2026, 11, 28, 16, 0, tzinfo=UTC), "6h"),
    ],
)
def test_each_form_gives_its_first_time_in_the_zone_and_its_recurrence(words: str, first: datetime, every: str) -> None:
    assert parse_schedule(words, now=NOW, zone=PARIS) == (first, every)


@pytest.mark.parametrize(
    ("words", "says"),
    [
        ("daily", "Say at what time, in Europe/Paris"),
        ("every tuesday", "Say at what time"),
        ("tomorrow 9:00", "is no schedule I can read"),
        ("every 30m", "is no schedule I can read"),
        ("monday 25:99", "is no schedule I can read"),
        ("x" * 101, "at most 100 characters"),
    ],
)
def test_anything_else_is_refused_in_one_line_naming_the_forms(words: str, says: str) -> None:
    with pytest.raises(TimeError, match=says) as refused:
        parse_schedule(words, now=NOW, zone=PARIS)
    assert "\n" not in str(refused.value)
