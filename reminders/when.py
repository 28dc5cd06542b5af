"""Members' words for a time and a recurrence, read in the deploy's TIMEZONE.

A small grammar of its own rather than a date-parsing library: the forms below are all `/remind` and the `remind`
tool take, each says what it means, and anything else is refused with the list (a library that guesses at "next
friday-ish" would post at a time the member did not mean).

When: a delay (`2h`, `90m`, `1h30m`, `in 2 hours`, `45 seconds`, `3 days`, `1 week`), a day and a time (`today
17:30`, `tomorrow 9:00`, `monday 9am`), a time alone (`9:00`, the next one to come), or a date and time
(`2026-12-01 14:00`, ISO 8601, an offset honoured, none read in the zone).

Every: `hourly`, `every N hours` / `Nh` (at least one hour), `daily`, `weekdays`, `weekly`. A day's recurrence
keeps its wall-clock time across daylight-saving changes.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

WHEN_EXAMPLES = "`2h`, `90m`, `in 2 hours`, `tomorrow 9:00`, `monday 9:00`, `17:30` or `2026-12-01 14:00`"
EVERY_EXAMPLES = "`hourly`, `6h` (every 6 hours), `daily`, `weekdays` or `weekly`"
DAILY, WEEKDAYS, WEEKLY = "daily", "weekdays", "weekly"

_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_DELAY_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
# Unambiguous on purpose: each letter belongs to a unit and "and" needs whitespace around it, so a hostile string
# ("1aand" many times) is matched or refused in linear time instead of backtracking exponentially on the event loop.
_DELAY = re.compile(r"(?:\d+(?:\.\d+)?\s*[a-z]+(?:\s*,\s*|\s+and\s+|\s+)?)+")
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EVERY_HOURS = re.compile(r"(?:every\s+)?(\d+)\s*(?:h|hr|hrs|hour|hours)")
_STORED_HOURS = re.compile(r"(\d+)h")
# Longer words are no time; and no delay reaches past the furthest a reminder may be set (reminders/book.py).
_WHEN_MAX_CHARS = 100
EVERY_MAX_CHARS = 40
_DELAY_MAX_SECONDS = 400 * 86400


class TimeError(ValueError):
    """Words that are no time (or recurrence) Parley reads; the message says which forms it takes."""


def parse_when(text: str, *, now: datetime, zone: ZoneInfo) -> datetime:
    """The moment `text` names, as an aware datetime; `now` (aware) is when it was said.

    Raises:
        TimeError: `text` is none of the forms in the module's docstring, or a moment that has passed.
    """
    if len(text) > _WHEN_MAX_CHARS:
        raise TimeError(f"A time is at most {_WHEN_MAX_CHARS} characters: write it like {WHEN_EXAMPLES}.")
    words = " ".join(text.lower().replace(" at ", " ").split())
    words = words.removeprefix("in ").removesuffix(" from now")
    found = _delay(words, now)
    if found is None:
        found = _iso(text.strip(), zone) or _day_and_clock(words, now, zone)
    if found is None:
        raise TimeError(f"“{text.strip()[:60]}” is no time I can read: write it like {WHEN_EXAMPLES}.")
    if found <= now:
        raise TimeError(f"{describe(found, zone)} has passed: give a time to come.")
    return found


def _delay(words: str, now: datetime) -> datetime | None:
    if not _DELAY.fullmatch(words):
        return None
    seconds = 0.0
    for amount, unit in _DELAY_PART.findall(words):
        if unit not in _UNITS:
            return None
        seconds += float(amount) * _UNITS[unit]
    if seconds > _DELAY_MAX_SECONDS:  # also keeps timedelta from overflowing on a number of 400 digits
        raise TimeError("A reminder may be set at most a year ahead.")
    return now + timedelta(seconds=seconds)


def _iso(text: str, zone: ZoneInfo) -> datetime | None:
    if not re.match(r"\d{4}-\d{2}-\d{2}", text):
        return None
    try:
        moment = datetime.fromisoformat(text)
        moment = moment.replace(tzinfo=zone) if moment.tzinfo is None else moment
        moment.astimezone(zone)  # year 1 with an offset east of UTC lies before datetime.min: OverflowError
    except (ValueError, OverflowError):
        raise TimeError(f"“{text[:60]}” is no date and time: write it like `2026-12-01 14:00`.") from None
    return moment


def _day_and_clock(words: str, now: datetime, zone: ZoneInfo) -> datetime | None:
    """`today`, `tomorrow` or a weekday (`next` before it changes nothing) and a clock time, or a clock time alone:
    the next such moment to come, in `zone`."""
    local_now = now.astimezone(zone)
    first, _, rest = words.removeprefix("next ").partition(" ")
    today = local_now.date()
    day = _day(first, today)
    clock = _clock(words if day is None else rest)
    if clock is None:
        return None
    if day is None:  # a clock time alone: today's, or tomorrow's once today's has passed
        found = datetime.combine(today, clock, tzinfo=zone)
        return found if found > local_now else datetime.combine(today + timedelta(days=1), clock, tzinfo=zone)
    found = datetime.combine(day, clock, tzinfo=zone)
    if first not in ("today", "tomorrow") and found <= local_now:
        found = datetime.combine(day + timedelta(days=7), clock, tzinfo=zone)  # this weekday's time has passed
    return found


def _day(word: str, today: date) -> date | None:
    if word == "today":
        return today
    if word == "tomorrow":
        return today + timedelta(days=1)
    weekday = next((i for i, name in enumerate(_WEEKDAYS) if len(word) >= 3 and name.startswith(word)), None)
    return None if weekday is None else today + timedelta(days=(weekday - today.weekday()) % 7)


def _clock(words: str) -> time | None:
    match = _CLOCK.fullmatch(words)
    if match is None:
        return None
    hour, minute, half = int(match[1]), int(match[2] or 0), match[3]
    if half is None and match[2] is None:
        return None  # a bare number is no time of day
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    return time(hour, minute)


def parse_every(text: str) -> str:
    """A recurrence as stored: `daily`, `weekdays`, `weekly` or `<N>h`.

    Raises:
        TimeError: `text` is none of EVERY_EXAMPLES, or fewer than one hour apart.
    """
    if len(text) > EVERY_MAX_CHARS:
        raise TimeError(f"A recurrence is at most {EVERY_MAX_CHARS} characters: write {EVERY_EXAMPLES}.")
    words = " ".join(text.lower().split()).removeprefix("every ").strip()
    if words in ("day", DAILY):
        return DAILY
    if words in ("weekday", WEEKDAYS):
        return WEEKDAYS
    if words in ("week", WEEKLY):
        return WEEKLY
    if words in ("hour", "hourly"):
        return "1h"
    match = _EVERY_HOURS.fullmatch(words)
    if match is None:
        if _DELAY.fullmatch(words):
            raise TimeError("A reminder repeats at most every hour: write `hourly`, `6h`, `daily` or `weekly`.")
        raise TimeError(f"“{text.strip()[:40]}” is no recurrence I can read: write {EVERY_EXAMPLES}.")
    hours = int(match[1])
    if not 1 <= hours <= 24 * 7:
        raise TimeError("Every so many hours must be from 1 to 168 (a week); use `daily` or `weekly` for days.")
    return f"{hours}h"


SCHEDULE_EXAMPLES = "`every monday 9:00`, `daily 18:00`, `weekdays 8:30`, `weekly friday 17:00` or `every 6h`"
_DAY_RECURRENCES = {"day": DAILY, "daily": DAILY, "weekday": WEEKDAYS, "weekdays": WEEKDAYS}


def parse_schedule(text: str, *, now: datetime, zone: ZoneInfo) -> tuple[datetime, str]:
    """A schedule in members' words (`every monday 9:00`, `daily 18:00`, `weekdays 8:30`, `every 6h`): its first time
    to come, as `first_time` gives it, and its recurrence as stored (`parse_every`'s). A weekday names a weekly
    schedule; a schedule by the hour first comes one step from `now`.

    Raises:
        TimeError: `text` is none of SCHEDULE_EXAMPLES.
    """
    if len(text) > _WHEN_MAX_CHARS:
        raise TimeError(f"A schedule is at most {_WHEN_MAX_CHARS} characters: write it like {SCHEDULE_EXAMPLES}.")
    words = " ".join(text.lower().replace(" at ", " ").split()).removeprefix("every ")
    head, _, rest = words.partition(" ")
    if head in ("week", "weekly"):
        every, when = WEEKLY, rest
    elif head in _DAY_RECURRENCES:
        every, when = _DAY_RECURRENCES[head], rest
    elif head not in ("today", "tomorrow") and _day(head.removesuffix("s"), now.date()) is not None:
        every, when = WEEKLY, f"{head.removesuffix('s')} {rest}"
    else:
        try:
            every = parse_every(words)
        except TimeError:
            raise TimeError(f"“{text.strip()[:60]}” is no schedule I can read: write {SCHEDULE_EXAMPLES}.") from None
        return now + timedelta(hours=int(every.removesuffix("h"))), every
    if not _CLOCK.search(when):
        raise TimeError(f"Say at what time, in {zone.key}: write it like {SCHEDULE_EXAMPLES}.")
    try:
        first = parse_when(when, now=now, zone=zone)
    except TimeError:
        raise TimeError(f"“{text.strip()[:60]}” is no schedule I can read: write {SCHEDULE_EXAMPLES}.") from None
    return first_time(first, every, zone=zone), every


def first_time(due: datetime, every: str, *, zone: ZoneInfo) -> datetime:
    """When a reminder set for `due`, repeated `every` ('' once), first comes, as the wall time it really is: a time
    in a spring-forward gap (02:30 on the night clocks go from 02:00 to 03:00) is the 03:30 it falls on, so the
    time told, stored and repeated is the same; a weekdays one set on a weekend moves on to Monday at its time."""
    local = due.astimezone(UTC).astimezone(zone)  # via UTC: astimezone to its own zone would keep a gap time as is
    if every != WEEKDAYS or local.weekday() < 5:
        return local
    return datetime.combine(local.date() + timedelta(days=7 - local.weekday()), local.time(), tzinfo=zone)


def next_time(due: datetime, every: str, *, after: datetime, zone: ZoneInfo) -> datetime:
    """The first time of the recurrence `every` (from `due`) that is later than `after`: a reminder missed several
    times while Parley was away moves on to its next time to come, not through each one it missed."""
    step_hours = _STORED_HOURS.fullmatch(every)
    if step_hours is not None:
        step = timedelta(hours=int(step_hours[1]))
        missed = max((after - due) // step, 0)
        moment = due + step * missed
        return moment if moment > after else moment + step
    local = due.astimezone(zone)
    days = 7 if every == WEEKLY else 1
    # Whole days ahead of `due`, close to `after`, then day by day (a week's worth at most) to the next one.
    skip = max((after.astimezone(zone).date() - local.date()).days // days - 1, 0) * days
    day = local.date() + timedelta(days=skip)
    while True:
        day += timedelta(days=days)
        moment = datetime.combine(day, local.time(), tzinfo=zone)
        if moment > after and (every != WEEKDAYS or day.weekday() < 5):
            return moment


def describe_every(every: str) -> str:
    """A stored recurrence in words: `every day`, `every 6 hours`."""
    if every == DAILY:
        return "every day"
    if every == WEEKDAYS:
        return "every weekday"
    if every == WEEKLY:
        return "every week"
    hours = int(every.removesuffix("h"))
    return "every hour" if hours == 1 else f"every {hours} hours"


def describe(moment: datetime, zone: ZoneInfo) -> str:
    """A moment as members read it, in the zone: `Mon 1 Dec 14:00 UTC`."""
    local = moment.astimezone(zone)
    return f"{local:%a} {local.day} {local:%b %H:%M} {local.tzname()}"
