"""Tests for reminders as units: reading times (reminders/when.py), the rules (reminders/book.py), the scheduler
(reminders/scheduler.py) with a fake poster and an injected clock, and the remind tool through the answer agent; on a
real SQLite archive under tmp_path."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import discord
import pytest
from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from admission.access_gate import AccessGate, RolesUnknown
from admission.access_lists import AccessLists
from admission.optout import OptOuts as MemberOptOuts
from agent import build_responder, generate_reply
from archive import Archive, Reminder, ReminderLimits
from archive.backends import open_archive
from archive.sqlite import SQLiteArchive
from config import Settings
from conversation import ChannelConversation, utc_now
from edge.reminder_posts import DiscordReminderPosts, reminder_scheduler
from records import MessageRecord
from reminders.book import ReminderBook, ReminderRefused, post_text
from reminders.scheduler import UNKNOWN_RETRY, OwnerUnknown, PostRefused, ReminderScheduler
from reminders.when import TimeError, describe, next_time, parse_every, parse_when
from tests.tools.test_tool_approval import FakeApprover
from tests.tools.test_tools import deps as chat_deps
from tools.approval import Verdict

PARIS = ZoneInfo("Europe/Paris")
# A Wednesday, 16:00 in Paris.
NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)
GUILD, CHANNEL, ALICE, BOB = 42, 500, 7, 8


# --- Reading times ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "meant"),
    [
        ("2h", datetime(2026, 11, 25, 18, 0)),
        ("90m", datetime(2026, 11, 25, 17, 30)),
        ("1h30m", datetime(2026, 11, 25, 17, 30)),
        ("in 2 hours", datetime(2026, 11, 25, 18, 0)),
        ("3 days", datetime(2026, 11, 28, 16, 0)),
        ("45 seconds", datetime(2026, 11, 25, 16, 0, 45)),
        ("tomorrow 9:00", datetime(2026, 11, 26, 9, 0)),
        ("Tomorrow at 9:30pm", datetime(2026, 11, 26, 21, 30)),
        ("today 17:30", datetime(2026, 11, 25, 17, 30)),
        ("17:30", datetime(2026, 11, 25, 17, 30)),
        ("9:00", datetime(2026, 11, 26, 9, 0)),  # today's has passed
        ("monday 9:00", datetime(2026, 11, 30, 9, 0)),
        ("next mon 9am", datetime(2026, 11, 30, 9, 0)),
        ("wednesday 9:00", datetime(2026, 12, 2, 9, 0)),  # today's has passed: next week's
        ("2026-12-01 14:00", datetime(2026, 12, 1, 14, 0)),
        ("2026-12-01T13:00+00:00", datetime(2026, 12, 1, 14, 0)),
    ],
)
def test_times_are_read_in_the_zone(said: str, meant: datetime) -> None:
    assert parse_when(said, now=NOW, zone=PARIS) == meant.replace(tzinfo=PARIS)


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("soon", "is no time I can read"),
        ("9", "is no time I can read"),
        ("tomorrow 25:00", "is no time I can read"),
        ("2 parsecs", "is no time I can read"),
        ("today 9:00", "has passed"),
        ("2020-01-01 10:00", "has passed"),
        ("2026-13-01 10:00", "is no date and time"),
        ("0001-01-01 00:00+14:00", "is no date and time"),
        ("9" * 400 + " days", "at most 100 characters"),
        ("9" * 90 + " days", "at most a year ahead"),
    ],
)
def test_words_that_are_no_time_to_come_are_refused_with_the_forms(said: str, told: str) -> None:
    with pytest.raises(TimeError, match=told):
        parse_when(said, now=NOW, zone=PARIS)


def test_hostile_delays_are_refused_without_backtracking() -> None:
    """ "1aand" repeated once drove the delay pattern into exponential backtracking on the event loop; a recurrence
    had no length limit at all."""
    with pytest.raises(TimeError, match="at most 40 characters"):
        parse_every("1aand" * 40 + "!")
    with pytest.raises(TimeError, match="no time I can read"):
        parse_when("1aand" * 19 + "!", now=NOW, zone=PARIS)
    assert parse_when("1h and 30m", now=NOW, zone=PARIS) == parse_when("1h, 30 minutes", now=NOW, zone=PARIS)


def test_recurrences_are_read_and_bounded() -> None:
    assert [parse_every(w) for w in ("daily", "every day", "weekly", "weekdays", "hourly", "every 6 hours", "6h")] == [
        "daily", "daily", "weekly", "weekdays", "1h", "6h", "6h",
    ]  # fmt: skip
    with pytest.raises(TimeError, match="at most every hour"):
        parse_every("30m")
    with pytest.raises(TimeError, match="no recurrence"):
        parse_every("fortnightly")
    with pytest.raises(TimeError, match="from 1 to 168"):
        parse_every("0h")


def test_a_recurrence_missed_many_times_moves_to_its_next_time_to_come_keeping_its_wall_clock() -> None:
    """Daily at 9:00 in Paris stays 9:00 across the end of summer time (25 October 2026); hours step in UTC."""
    due = datetime(2026, 10, 20, 9, 0, tzinfo=PARIS)
    assert next_time(due, "daily", after=NOW, zone=PARIS) == datetime(2026, 11, 26, 9, 0, tzinfo=PARIS)
    assert next_time(due, "weekly", after=NOW, zone=PARIS) == datetime(2026, 12, 1, 9, 0, tzinfo=PARIS)
    friday = datetime(2026, 11, 27, 9, 0, tzinfo=PARIS)
    assert next_time(friday, "weekdays", after=friday, zone=PARIS) == datetime(2026, 11, 30, 9, 0, tzinfo=PARIS)
    hourly = datetime(2026, 11, 24, 0, 20, tzinfo=UTC)
    assert next_time(hourly, "5h", after=NOW, zone=PARIS) == datetime(
        2026, 11, 25, 16, 20, tzinfo=UTC
    )  # every 5 hours from 00:20 the day before
    assert next_time(NOW, "1h", after=NOW, zone=PARIS) == NOW + timedelta(hours=1)


# --- The rules ------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class OptOuts:
    def __init__(self) -> None:
        self.members: set[tuple[int, int]] = set()

    def opted_out(self, guild_id: int, member_id: int) -> bool:
        return (guild_id, member_id) in self.members


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[Archive]:
    opened = await open_archive(f"sqlite:///{tmp_path / 'parley.db'}", retention_days=0)
    yield opened
    await opened.close()


@pytest.fixture
def book(archive: Archive) -> ReminderBook:
    book = ReminderBook(ReminderLimits(per_member=2, per_server=3), PARIS, OptOuts(), Clock())
    book.archive = archive
    return book


async def remind(book: ReminderBook, owner: int = ALICE, when: str = "2h", **options: Any) -> Reminder:
    return await book.set(
        guild_id=GUILD, channel_id=CHANNEL, owner_id=owner, owner_may_post=True, text="check the deploy", when=when,
        post_here=False, **options,
    )  # fmt: skip


def test_the_book_reads_the_one_clock_of_the_engine(make_settings: Any) -> None:
    settings = make_settings()
    access = AccessGate(AccessLists(settings), Members({}, set()))
    assert reminder_scheduler(Client(), access, settings, MemberOptOuts()).book.clock is utc_now


async def test_a_reminder_set_is_stored_and_wakes_the_scheduler(book: ReminderBook, archive: Archive) -> None:
    reminder = await remind(book, when="tomorrow 9:00", every="weekdays")
    assert book.added.is_set()
    assert await archive.member_reminders(GUILD, ALICE) == [reminder]
    assert (reminder.due_at, reminder.every, reminder.created_at) == (
        datetime(2026, 11, 26, 9, 0, tzinfo=PARIS), "weekdays", NOW,
    )  # fmt: skip
    assert "Thu 26 Nov 09:00 CET, then every weekday" in book.confirmation(reminder)


async def test_a_weekdays_reminder_set_on_a_weekend_first_comes_on_monday(book: ReminderBook) -> None:
    reminder = await remind(book, when="saturday 9:00", every="weekdays")
    assert reminder.due_at == datetime(2026, 11, 30, 9, 0, tzinfo=PARIS)
    sunday = await remind(book, when="sunday 9:00")  # once: on the day asked
    assert sunday.due_at == datetime(2026, 11, 29, 9, 0, tzinfo=PARIS)


async def test_a_daily_reminder_set_in_the_spring_forward_gap_keeps_the_time_it_was_told(
    book: ReminderBook, archive: Archive
) -> None:
    """02:30 on 28 March 2027 does not exist in Berlin (02:00 -> 03:00): it is set, told, stored and repeated as
    03:30, rather than told 02:30 and then drifting to 03:30 from the next day on."""
    berlin = ZoneInfo("Europe/Berlin")
    book.zone = berlin
    book.clock = Clock(datetime(2027, 3, 20, 12, 0, tzinfo=UTC))
    reminder = await remind(book, when="2027-03-28 02:30", every="daily")
    assert (reminder.due_at.hour, reminder.due_at.minute) == (3, 30)
    assert "03:30 CEST" in book.confirmation(reminder)
    [stored] = await archive.member_reminders(GUILD, ALICE)
    after = next_time(stored.due_at, "daily", after=stored.due_at, zone=berlin)
    assert after == datetime(2027, 3, 29, 3, 30, tzinfo=berlin)


async def test_members_and_servers_over_their_limit_are_told_so_in_one_line(book: ReminderBook) -> None:
    await remind(book)
    await remind(book)
    with pytest.raises(ReminderRefused, match=r"You have 2 reminders waiting here, the most") as mine:
        await remind(book)
    await remind(book, owner=BOB)
    with pytest.raises(ReminderRefused, match=r"This server has 3 reminders waiting") as server:
        await remind(book, owner=BOB)
    assert "\n" not in str(mine.value) + str(server.value)


@pytest.mark.parametrize(
    ("options", "told"),
    [
        ({"text": "   "}, "the text is empty"),
        ({"text": "x" * 1001}, "at most 1000 characters"),
        ({"text": "a\n" * 499 + "a"}, "over Discord's 2000"),  # each line quoted with "> "
        ({"when": "in 400 days"}, "at most a year ahead"),
        ({"when": "yesterday"}, "no time I can read"),
        ({"every": "every 10 minutes"}, "at most every hour"),
    ],
)
async def test_what_cannot_be_a_reminder_is_refused_and_nothing_stored(
    book: ReminderBook, archive: Archive, options: dict[str, Any], told: str
) -> None:
    fields: dict[str, Any] = {"text": "check", "when": "2h", "every": ""} | options
    with pytest.raises(ReminderRefused, match=told):
        await book.set(
            guild_id=GUILD, channel_id=CHANNEL, owner_id=ALICE, owner_may_post=True, post_here=False, **fields
        )
    assert await archive.pending_reminders(GUILD, ALICE) == (0, 0)


async def test_a_member_who_opted_out_sets_none_and_without_an_archive_there_are_none(book: ReminderBook) -> None:
    assert isinstance(book.optouts, OptOuts)
    book.optouts.members.add((GUILD, ALICE))
    with pytest.raises(ReminderRefused, match="opted out"):
        await remind(book)
    book.archive = None
    with pytest.raises(ReminderRefused, match="archive, which is off"):
        await remind(book, owner=BOB)


async def test_only_the_owner_or_a_manager_of_its_channel_cancels_a_reminder(
    book: ReminderBook, archive: Archive
) -> None:
    reminder = await remind(book)
    with pytest.raises(ReminderRefused, match="someone else's"):
        await book.cancel(reminder.id, guild_id=GUILD, member_id=BOB, manages=lambda channel: False)
    with pytest.raises(ReminderRefused, match="no reminder"):
        await book.cancel(reminder.id, guild_id=GUILD + 1, member_id=ALICE, manages=lambda channel: True)
    asked: list[int] = []

    def manages(channel_id: int) -> bool:
        asked.append(channel_id)
        return True

    await book.cancel(reminder.id, guild_id=GUILD, member_id=BOB, manages=manages)
    assert asked == [CHANNEL]
    assert await archive.reminder(reminder.id) is None
    mine = await remind(book)
    await book.cancel(mine.id, guild_id=GUILD, member_id=ALICE, manages=lambda channel: False)
    assert await book.mine(GUILD, ALICE) == []


def test_the_post_quotes_the_owners_words_and_says_when_it_is_late() -> None:
    reminder = Reminder(1, GUILD, CHANNEL, ALICE, "check the deploy\n\n@everyone now", NOW, "daily", False, NOW)
    text = post_text(reminder, PARIS, late_since=NOW)
    assert text == (
        f"\N{ALARM CLOCK} <@{ALICE}>, you asked me to remind you (every day):\n> check the deploy\n>\n> @everyone now"
        "\n-# (late: due Wed 25 Nov 16:00 CET, Parley was offline)"
    )
    here = post_text(Reminder(1, GUILD, CHANNEL, ALICE, "standup", NOW, "", True, NOW), PARIS)
    assert here == f"\N{ALARM CLOCK} Timed post from <@{ALICE}>:\n> standup"


# --- The scheduler --------------------------------------------------------------------------------


class Poster:
    """Records posts; fails the first `failures` times, or refuses every reminder with `refused`."""

    def __init__(self, *, failures: int = 0, error: Exception | None = None, refused: str | None = None) -> None:
        self.posts: list[tuple[int, str]] = []
        self.failures = failures
        self.error = error or RuntimeError("Discord is down")
        self.refused = refused
        self.tries = 0
        self.ready = asyncio.Event()
        self.ready.set()
        self.unknown = False
        self.broken: set[int] = set()  # reminders whose check raises

    async def wait_until_ready(self) -> None:
        await self.ready.wait()

    async def refusal(self, reminder: Reminder) -> str | None:
        if self.unknown:
            raise OwnerUnknown("roles unknown")
        if reminder.id in self.broken:
            raise RuntimeError("the check failed")
        return self.refused

    async def post(self, reminder: Reminder, text: str) -> None:
        self.tries += 1
        if self.failures:
            self.failures -= 1
            raise self.error
        self.posts.append((reminder.id, text))


@pytest.fixture
async def scheduled(book: ReminderBook, archive: Archive) -> AsyncIterator[tuple[ReminderScheduler, Poster]]:
    poster = Poster()
    scheduler = ReminderScheduler(book, poster, None, retry_seconds=(0.0, 0.0))
    task = asyncio.create_task(scheduler.run(archive))
    await asyncio.wait_for(scheduler.passed.wait(), 5)
    yield scheduler, poster
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def stored_ids(archive: Archive) -> list[int]:
    """Every reminder row, delivered or not."""
    assert isinstance(archive, SQLiteArchive)
    return [int(rid) for (rid,) in await archive.read("SELECT id FROM reminders")]


async def one_pass(scheduler: ReminderScheduler, **delta: float) -> None:
    """Move the clock on and let the scheduler look at the due reminders once."""
    clock = scheduler.book.clock
    assert isinstance(clock, Clock)
    clock.advance(**delta)
    # Twice: the first pass to end may have begun before the clock moved (woken when a reminder was set); the one
    # after it began once that one had ended, so after the move.
    for _ in range(2):
        scheduler.passed.clear()
        scheduler.wake()
        await asyncio.wait_for(scheduler.passed.wait(), 5)


async def test_a_one_off_posts_once_at_its_time_and_is_gone(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive
) -> None:
    scheduler, poster = scheduled
    reminder = await remind(scheduler.book, when="3s")
    await one_pass(scheduler, seconds=2)
    assert poster.posts == []
    await one_pass(scheduler, seconds=1)
    await one_pass(scheduler, seconds=60)
    assert poster.posts == [(reminder.id, post_text(reminder, PARIS))]
    assert await archive.pending_reminders(GUILD, ALICE) == (0, 0)
    assert await stored_ids(archive) == []


async def test_a_recurring_reminder_missed_many_times_posts_once_late_and_moves_on(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive
) -> None:
    scheduler, poster = scheduled
    reminder = await remind(scheduler.book, when="17:00", every="daily")
    await one_pass(scheduler, days=3)  # Parley was away for three of its times
    assert [text for _, text in poster.posts] == [
        post_text(reminder, PARIS, late_since=datetime(2026, 11, 25, 17, 0, tzinfo=PARIS))
    ]
    [moved] = await archive.member_reminders(GUILD, ALICE)
    assert moved.due_at == datetime(2026, 11, 28, 17, 0, tzinfo=PARIS)
    await one_pass(scheduler, hours=1)
    assert len(poster.posts) == 2 and "late" not in poster.posts[1][1]


async def test_a_reminder_its_owner_may_no_longer_have_is_dropped_with_a_log_line(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler, poster = scheduled
    poster.refused = "its owner may not use Parley there now (member_blocked)"
    reminder = await remind(scheduler.book, when="1m", every="hourly")
    with caplog.at_level(logging.INFO, "parley.reminders"):
        await one_pass(scheduler, minutes=1)
    assert poster.tries == 0
    assert await archive.reminder(reminder.id) is None
    assert f"reminder {reminder.id} dropped: its owner may not use Parley there now" in caplog.text


async def test_a_reminder_whose_owner_cannot_be_judged_yet_is_kept_and_posted_later(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive
) -> None:
    """Roles unknown (servers not cached after a restart, an HTTP error): kept, not looked at again at once, and
    posted on a pass once they are known."""
    scheduler, poster = scheduled
    reminder = await remind(scheduler.book, when="1m", every="hourly")
    poster.unknown = True
    await one_pass(scheduler, minutes=1)
    assert await stored_ids(archive) == [reminder.id] and poster.tries == 0
    assert await scheduler._until_next(archive) == UNKNOWN_RETRY.total_seconds()  # no 0-second spin
    poster.unknown = False
    await one_pass(scheduler, seconds=1)
    assert poster.tries == 0  # still left for later
    await one_pass(scheduler, seconds=UNKNOWN_RETRY.total_seconds())
    assert len(poster.posts) == 1 and await stored_ids(archive) == [reminder.id]


async def test_the_scheduler_waits_until_discord_is_ready(book: ReminderBook, archive: Archive) -> None:
    poster = Poster()
    poster.ready.clear()
    scheduler = ReminderScheduler(book, poster, None)
    task = asyncio.create_task(scheduler.run(archive))
    await remind(book, when="1m")
    book.clock.advance(minutes=1)  # type: ignore[attr-defined]
    await asyncio.sleep(0)
    assert not scheduler.passed.is_set() and poster.tries == 0
    poster.ready.set()
    await asyncio.wait_for(scheduler.passed.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(poster.posts) == 1


class Members:
    """What Discord says of members' roles: known ones, members known to have left, and the rest unknown."""

    def __init__(self, roles: dict[int, frozenset[int]], gone: set[int]) -> None:
        self.roles, self.gone = roles, gone

    async def server_ids(self) -> list[int]:
        return [GUILD]

    def carried_roles(self, guild_id: int, user: discord.abc.Snowflake) -> frozenset[int] | None:
        return None

    async def roles_in(self, guild_id: int, member_id: int) -> frozenset[int] | None:
        if member_id in self.gone:
            return None
        if member_id not in self.roles:
            raise RolesUnknown(f"member {member_id}")
        return self.roles[member_id]

    async def member_in(self, guild_id: int, member_id: int) -> discord.Member | None:
        raise AssertionError("a reminder's owner is judged by their roles")


class Client:
    """Just what DiscordReminderPosts reads of the client."""

    async def wait_until_ready(self) -> None:
        return None

    def get_channel(self, id: int, /) -> None:
        return None

    def get_guild(self, id: int, /) -> None:
        return None

    def get_partial_messageable(
        self, id: int, *, guild_id: int | None = None, type: discord.ChannelType | None = None
    ) -> discord.PartialMessageable:
        raise AssertionError("no post in this test")


async def test_an_owner_whose_roles_are_unknown_is_not_judged_without_them(make_settings: Any) -> None:
    """A server whose list names a role: a member Discord cannot say anything of is unknown (kept for later), one
    known to have left or to lack the role is refused, one with it is not."""
    lists = AccessLists(make_settings())
    await lists.put(GUILD, 77, "role", "allow", BOB)
    members = Members({ALICE: frozenset({GUILD, 77}), BOB: frozenset({GUILD})}, gone={9})
    posts = DiscordReminderPosts(Client(), AccessGate(lists, members), OptOuts())  # type: ignore[arg-type]

    def owned_by(owner: int) -> Reminder:
        return Reminder(1, GUILD, CHANNEL, owner, "x", NOW, "", False, NOW)

    assert await posts.refusal(owned_by(ALICE)) is None
    assert await posts.refusal(owned_by(BOB)) == "its owner may not use Parley there now (not_allowed_role)"
    assert await posts.refusal(owned_by(9)) == "its owner may not use Parley there now (not_allowed_role)"
    with pytest.raises(OwnerUnknown):
        await posts.refusal(owned_by(10))


async def test_one_failing_reminder_holds_up_none_of_the_others(book: ReminderBook, archive: Archive) -> None:
    """A failed post is tried again on a later pass, not by sleeping inside this one; a check that raises leaves
    that reminder for later and the pass goes on."""
    poster = Poster(failures=1)
    scheduler = ReminderScheduler(book, poster, None, retry_seconds=(60.0, 600.0))
    task = asyncio.create_task(scheduler.run(archive))
    await asyncio.wait_for(scheduler.passed.wait(), 5)
    failing, fine = await remind(book, when="1m"), await remind(book, owner=BOB, when="1m")
    broken = await remind(book, when="1m")
    poster.broken = {broken.id}
    await one_pass(scheduler, minutes=1)
    assert [rid for rid, _ in poster.posts] == [fine.id]
    assert await scheduler._until_next(archive) == 60.0
    poster.broken = set()
    await one_pass(scheduler, seconds=60)
    assert sorted(rid for rid, _ in poster.posts) == sorted([fine.id, failing.id, broken.id])
    assert await stored_ids(archive) == []
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_failed_post_is_tried_again_and_a_refused_one_is_not(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive, caplog: pytest.LogCaptureFixture
) -> None:
    """Two failures then a post: posted once. A refusal from Discord is not tried again, and a post that fails
    every try is logged; neither stops the scheduler."""
    scheduler, poster = scheduled
    poster.failures = 2
    await remind(scheduler.book, when="1m")
    await one_pass(scheduler, minutes=1)
    assert (poster.tries, len(poster.posts)) == (3, 1)

    poster.failures, poster.error, poster.tries = 1, PostRefused("Forbidden: Missing Access"), 0
    await remind(scheduler.book, when="1m")
    poster.failures = 1
    with caplog.at_level(logging.WARNING, "parley.reminders"):
        await one_pass(scheduler, minutes=1)
    assert poster.tries == 1 and "not posted: Forbidden: Missing Access" in caplog.text

    poster.failures, poster.error, poster.tries = 5, RuntimeError("boom"), 0
    await remind(scheduler.book, when="1m")
    with caplog.at_level(logging.WARNING, "parley.reminders"):
        await one_pass(scheduler, minutes=1)
    assert poster.tries == 3 and "not posted after 3 tries: RuntimeError: boom" in caplog.text

    poster.failures = 0
    await remind(scheduler.book, when="1m")
    await one_pass(scheduler, minutes=1)
    assert len(poster.posts) == 2
    assert await stored_ids(archive) == []


async def test_a_recurring_reminder_stays_while_its_channel_refuses_and_goes_with_its_channel(
    scheduled: tuple[ReminderScheduler, Poster], archive: Archive
) -> None:
    scheduler, poster = scheduled
    reminder = await remind(scheduler.book, when="1h", every="hourly")
    poster.failures, poster.error = 1, PostRefused("Forbidden: Missing Access")
    await one_pass(scheduler, hours=1)
    assert await stored_ids(archive) == [reminder.id]
    poster.failures, poster.error = 1, PostRefused("NotFound: Unknown Channel", gone=True)
    await one_pass(scheduler, hours=1)
    assert await stored_ids(archive) == [] and poster.posts == []


# --- The remind tool --------------------------------------------------------------------------------


def calling_remind(**arguments: Any) -> tuple[FunctionModel, list[str]]:
    """A model that calls `remind` with `arguments`, then answers; the tool's answers are collected."""
    returned: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("remind", arguments, tool_call_id="r1")])
        returned.extend(str(part.content) for part in returns)
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model), returned


async def ask(book: ReminderBook | None, settings: Settings, **fields: Any) -> list[str]:
    model, returned = calling_remind(**fields.pop("arguments"))
    message = MessageRecord(900, CHANNEL, ALICE, "Alice", "remind me in 2 hours to check the deploy", NOW)
    conversation = ChannelConversation(CHANNEL, NOW, NOW, deque([message]))
    agent = build_responder(settings, model=model, archive_enabled=False, memory_enabled=False, reminders_enabled=True)
    in_a_dm = fields.pop("in_a_dm", False)
    # In GUILD, CHANNEL, for ALICE, who may post there and approves the call (the tool asks first:
    # its entry in tools/registry.py).
    deps = chat_deps(reminders=book, requester_may_post=True, approver=FakeApprover(Verdict.APPROVED), **fields)
    if in_a_dm:
        deps.guild_id = 0
    await generate_reply(agent, conversation, message, deps)
    return returned


async def test_the_tool_sets_a_reminder_for_the_asker_where_they_asked(
    book: ReminderBook, archive: Archive, make_settings: Any
) -> None:
    settings = make_settings(llm_base_url="http://127.0.0.1:9/v1")
    [said] = await ask(book, settings, arguments={"when": "2h", "text": "check the deploy"})
    [stored] = await archive.member_reminders(GUILD, ALICE)
    assert (stored.channel_id, stored.text, stored.post_here) == (CHANNEL, "check the deploy", False)
    assert said == f"Set. {book.confirmation(stored)}"
    assert describe(stored.due_at, PARIS) in said


@pytest.mark.parametrize(
    ("fields", "told"),
    [
        ({"arguments": {"when": "2h", "text": "standup", "post_here": True}}, "needs the Manage Messages permission"),
        ({"arguments": {"when": "someday", "text": "x"}}, "Not set: “someday” is no time I can read"),
        ({"arguments": {"when": "2h", "text": "x"}, "in_a_dm": True}, "reminders are set in a server channel"),
    ],
)
async def test_the_tool_says_why_a_reminder_is_not_set(
    book: ReminderBook, archive: Archive, make_settings: Any, fields: dict[str, Any], told: str
) -> None:
    [said] = await ask(book, make_settings(llm_base_url="http://127.0.0.1:9/v1"), **fields)
    assert told in said
    assert await archive.pending_reminders(GUILD, ALICE) == (0, 0)
    assert await archive.pending_reminders(0, ALICE) == (0, 0)


async def test_a_timed_post_from_the_tool_needs_manage_messages(
    book: ReminderBook, archive: Archive, make_settings: Any
) -> None:
    settings = make_settings(llm_base_url="http://127.0.0.1:9/v1")
    arguments = {"when": "monday 9:00", "text": "standup", "every": "weekly", "post_here": True}
    [said] = await ask(book, settings, arguments=arguments, requester_manages_messages=True)
    [stored] = await archive.member_reminders(GUILD, ALICE)
    assert said.startswith("Set. I'll post this here") and (stored.post_here, stored.every) == (True, "weekly")


async def test_a_profile_that_withholds_reminders_offers_no_remind_tool(book: ReminderBook, make_settings: Any) -> None:
    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([tool.name for tool in info.function_tools])
        return ModelResponse(parts=[TextPart("ok")])

    message = MessageRecord(900, CHANNEL, ALICE, "Alice", "remind me", NOW)
    conversation = ChannelConversation(CHANNEL, NOW, NOW, deque([message]))
    settings = make_settings(llm_base_url="http://127.0.0.1:9/v1")
    agent = build_responder(settings, model=FunctionModel(model), memory_enabled=False, reminders_enabled=True)
    for tool_sets in (frozenset({"archive"}), frozenset({"reminders"})):
        await generate_reply(
            agent, conversation, message, chat_deps(tool_sets, reminders=book, requester_may_post=True)
        )
    assert ["remind" in names for names in offered] == [False, True]
