"""Moments and days as the archive stores them: Unix milliseconds and days since 1970-01-01 (UTC)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_EPOCH_DAY = date(1970, 1, 1)


def to_ms(moment: datetime) -> int:
    """Unix milliseconds; a naive datetime is taken as UTC (integer division avoids float rounding)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _ONE_MS


def from_ms(ms: int) -> datetime:
    """The UTC moment of Unix milliseconds `ms` (`to_ms`'s inverse)."""
    return _EPOCH + ms * _ONE_MS


def to_day(day: date) -> int:
    return (day - _EPOCH_DAY).days


def from_day(days: int) -> date:
    """The UTC day `days` after 1970-01-01 (`to_day`'s inverse)."""
    return _EPOCH_DAY + timedelta(days=days)
