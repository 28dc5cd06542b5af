"""The rules of reminders and timed posts, whoever sets them (`/remind`, the `remind` tool): what they may say,
how far ahead and how often they may come, how many a member and a server may have waiting, who may cancel one,
and what Parley posts when one comes due.

Two kinds: a reminder ("remind me…") pings its owner alone in the channel it was set in; a timed post ("post
here…") pings no one, and needs Manage Messages in the channel (the caller checks the permission, which only
Discord knows). Either quotes its owner's words. The limits are one count claim in the archive: the statement that
stores a reminder counts the owner's and the server's and stores it only under both limits, one claim per server
at a time on either backend, whatever process or request makes it (archive/reminders.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NoReturn, Protocol
from zoneinfo import ZoneInfo

from archive import ArchiveWriteFailed, Reminder, ReminderLimits, ReminderTable
from reminders.when import (
    TimeError,
    describe,
    describe_every,
    first_time,
    parse_every,
    parse_schedule,
    parse_when,
)

log = logging.getLogger("parley.reminders")

TEXT_MAX_CHARS = 1000
# A scheduled prompt's: a task for the model, not a post, but bounded all the same.
PROMPT_MAX_CHARS = 1500
# A message's limit (https://discord.com/developers/docs/resources/message#create-message): a longer post is refused
# with a 400 at its time, so a text whose quoted lines, header and late line would exceed it is refused when set.
POST_MAX_CHARS = 2000
# The furthest ahead a reminder may be set: a year (and a day, so "in 1 year" fits).
FURTHEST = timedelta(days=366)
NO_ARCHIVE = "Reminders are kept in the archive, which is off here (DATABASE_URL is empty)."
OPTED_OUT = (
    "You opted out of Parley in this server, so it keeps no reminders for you; `/parley privacy optin` undoes it."
)
NOT_SAVED = "The reminder could not be saved (the archive refused it; see Parley's log); nothing was set."
MAY_NOT_POST = "You can't post in this channel, so Parley won't post a reminder of yours here either."


class ReminderRefused(Exception):
    """A reminder not set or not cancelled; the message is the one line the member (or the model) is told."""


class OptedOut(Protocol):
    """Who opted out where (admission/optout.py's OptOuts)."""

    def opted_out(self, guild_id: int, member_id: int) -> bool: ...


class ReminderBook:
    """Sets, lists and cancels reminders in the archive (once it is `archive`d), under the limits; wakes the
    scheduler (`added`) when one is set, since it may be due before the one it sleeps until."""

    def __init__(
        self, limits: ReminderLimits, zone: ZoneInfo, optouts: OptedOut, clock: Callable[[], datetime]
    ) -> None:
        self.limits = limits
        self.zone = zone
        self.optouts = optouts
        self.archive: ReminderTable | None = None
        self.added = asyncio.Event()
        # Every time the book and the scheduler read (conversation.utc_now, given by the composition root: the
        # engine's layer is not the book's to import); a test moves it on instead of waiting.
        self.clock = clock

    def _table(self) -> ReminderTable:
        if self.archive is None:
            raise ReminderRefused(NO_ARCHIVE)
        return self.archive

    async def set(
        self,
        *,
        guild_id: int,
        channel_id: int,
        owner_id: int,
        owner_may_post: bool,
        text: str,
        when: str,
        every: str = "",
        post_here: bool,
    ) -> Reminder:
        """Store a reminder of `text` at `when` (members' words, reminders/when.py), repeated `every` ('' once), for
        an owner who may see the channel and post in it now (`owner_may_post`, as Discord says; checked again each
        time it is posted, edge/reminder_posts.py).

        Raises:
            ReminderRefused: the owner may not post in the channel, the text, time or recurrence cannot be used, a
                limit is reached, the member opted out, or the archive is off or refused the write; nothing was
                stored.
        """
        table = self._table()
        if self.optouts.opted_out(guild_id, owner_id):
            raise ReminderRefused(OPTED_OUT)
        if not owner_may_post:
            raise ReminderRefused(MAY_NOT_POST)
        words = text.strip()
        if not words:
            raise ReminderRefused("Say what to be reminded of: the text is empty.")
        if len(words) > TEXT_MAX_CHARS:
            raise ReminderRefused(f"A reminder says at most {TEXT_MAX_CHARS} characters; this one has {len(words)}.")
        now = self.clock()
        try:
            due = parse_when(when, now=now, zone=self.zone)
            recurrence = parse_every(every) if every.strip() else ""
            due = first_time(due, recurrence, zone=self.zone)
        except TimeError as error:
            raise ReminderRefused(str(error)) from None
        if due - now > FURTHEST:
            raise ReminderRefused("A reminder may be set at most a year ahead.")
        draft = Reminder(0, guild_id, channel_id, owner_id, words, due, recurrence, post_here, now)
        longest = len(post_text(draft, self.zone, late_since=due))
        if longest > POST_MAX_CHARS:
            raise ReminderRefused(
                f"Quoted, this reminder would be a post of {longest} characters, over Discord's {POST_MAX_CHARS}:"
                " use fewer lines."
            )
        reminder = Reminder(
            await table.new_reminder_id(), guild_id, channel_id, owner_id, words, due, recurrence, post_here, now
        )
        try:
            stored = await table.add_reminder(reminder, self.limits)
        except ArchiveWriteFailed:
            raise ReminderRefused(NOT_SAVED) from None
        if not stored:
            await self._refuse_over_limits(table, guild_id, owner_id)
        self.added.set()
        log.info(
            "reminder %s set in channel %s for user %s",
            reminder.id,
            channel_id,
            owner_id,
            extra={"reminder_id": reminder.id, "channel_id": channel_id, "requester_id": owner_id},
        )
        return reminder

    async def schedule(
        self, *, guild_id: int, channel_id: int, owner_id: int, prompt: str, when: str, per_server: int
    ) -> Reminder:
        """Store a scheduled prompt (`/parley-admin schedule add`; the caller checked the admin may set it there):
        `prompt` answered by the model at each time `when` says (reminders/when.py's `parse_schedule`), at most
        `per_server` (SCHEDULES_PER_SERVER) in the server, in the same count claim as reminders.

        Raises:
            ReminderRefused: the prompt or time cannot be used, the server has `per_server` already, the admin
                opted out, or the archive is off or refused the write; nothing was stored.
        """
        table = self._table()
        if self.optouts.opted_out(guild_id, owner_id):
            raise ReminderRefused(OPTED_OUT)
        words = prompt.strip()
        if not words:
            raise ReminderRefused("Say what Parley should answer at each time: the prompt is empty.")
        if len(words) > PROMPT_MAX_CHARS:
            raise ReminderRefused(
                f"A scheduled prompt says at most {PROMPT_MAX_CHARS} characters; this one has {len(words)}."
            )
        now = self.clock()
        try:
            due, every = parse_schedule(when, now=now, zone=self.zone)
        except TimeError as error:
            raise ReminderRefused(str(error)) from None
        schedule = Reminder(
            await table.new_reminder_id(), guild_id, channel_id, owner_id, words, due, every, True, now, prompt=True
        )
        try:
            stored = await table.add_reminder(schedule, ReminderLimits(per_server, per_server))
        except ArchiveWriteFailed:
            raise ReminderRefused(NOT_SAVED) from None
        if not stored:
            raise ReminderRefused(
                f"This server has {per_server} scheduled prompts, the most it may have (SCHEDULES_PER_SERVER):"
                " remove one with `/parley-admin schedule remove` first."
            )
        self.added.set()
        log.info("scheduled prompt %s set in channel %s by user %s", schedule.id, channel_id, owner_id)
        return schedule

    async def scheduled(self, guild_id: int) -> list[Reminder]:
        """The server's scheduled prompts, soonest first."""
        return await self._table().scheduled_prompts(guild_id)

    async def unschedule(self, schedule: Reminder) -> None:
        """Remove a scheduled prompt, as `scheduled_prompt` found it.

        Raises:
            ReminderRefused: the archive could not delete it.
        """
        try:
            await self._table().delete_reminder(schedule.id)
        except ArchiveWriteFailed:
            raise ReminderRefused("The scheduled prompt could not be removed (see Parley's log); try again.") from None
        log.info("scheduled prompt %s removed", schedule.id)

    async def scheduled_prompt(self, schedule_id: int, guild_id: int) -> Reminder:
        """The server's scheduled prompt `schedule_id`.

        Raises:
            ReminderRefused: the server has no such scheduled prompt.
        """
        found = await self._table().reminder(schedule_id)
        if found is None or found.guild_id != guild_id or not found.prompt:
            raise ReminderRefused(
                f"There is no scheduled prompt {schedule_id} in this server; `/parley-admin schedule list` shows them."
            )
        return found

    async def _refuse_over_limits(self, table: ReminderTable, guild_id: int, owner_id: int) -> NoReturn:
        """Say which limit left no room for a reminder the archive's count claim refused."""
        mine, everyone = await table.pending_reminders(guild_id, owner_id)
        if mine >= self.limits.per_member:
            raise ReminderRefused(
                f"You have {_count(mine)} waiting here, the most one member may have: cancel one with"
                " `/remind cancel` first."
            )
        if everyone >= self.limits.per_server:
            raise ReminderRefused(
                f"This server has {_count(everyone)} waiting, the most it may have: some must come due or be"
                " cancelled first."
            )
        raise ReminderRefused(NOT_SAVED)  # room again already: one came due or was cancelled meanwhile

    async def mine(self, guild_id: int, owner_id: int) -> list[Reminder]:
        """The member's reminders in the server still to come, soonest first."""
        return await self._table().member_reminders(guild_id, owner_id)

    async def cancel(
        self, reminder_id: int, *, guild_id: int, member_id: int, manages: Callable[[int], bool]
    ) -> Reminder:
        """Cancel a reminder of the server: its owner's, or anyone's for a member with Manage Messages in the
        reminder's channel (`manages(channel_id)`).

        Raises:
            ReminderRefused: there is no such reminder in the server, it is someone else's and the member may not
                manage its channel, or the archive could not delete it.
        """
        table = self._table()
        reminder = await table.reminder(reminder_id)
        if reminder is None or reminder.guild_id != guild_id:
            raise ReminderRefused(
                f"There is no reminder {reminder_id} waiting in this server; `/remind list` shows yours."
            )
        if reminder.owner_id != member_id and not manages(reminder.channel_id):
            raise ReminderRefused(
                f"Reminder {reminder_id} is someone else's; Manage Messages in the channel it posts to can cancel it."
            )
        try:
            await table.delete_reminder(reminder_id)
        except ArchiveWriteFailed:
            raise ReminderRefused("The reminder could not be cancelled (see Parley's log); try again.") from None
        log.info("reminder %s cancelled by user %s", reminder_id, member_id, extra={"reminder_id": reminder_id})
        return reminder

    def describe(self, reminder: Reminder) -> str:
        """One line for a list: id, next time, recurrence, channel, and the start of its text."""
        kind = "scheduled prompt" if reminder.prompt else "post here" if reminder.post_here else "reminder"
        every = f", {describe_every(reminder.every)}" if reminder.every else ""
        text = " ".join(reminder.text.split())
        shown = text if len(text) <= 80 else text[:79] + "…"
        return (
            f"**{reminder.id}** · {describe(reminder.due_at, self.zone)}{every} · {kind} in <#{reminder.channel_id}>"
            f" · “{shown}”"
        )

    def confirmation(self, reminder: Reminder) -> str:
        """The line that says a reminder was set: when, how often, and its id to cancel it by."""
        kind = "I'll post this here" if reminder.post_here else "I'll remind you"
        every = f", then {describe_every(reminder.every)}" if reminder.every else ""
        return (
            f"{kind} on {describe(reminder.due_at, self.zone)}{every} (reminder {reminder.id};"
            f" `/remind cancel id:{reminder.id}` cancels it)."
        )


def post_text(reminder: Reminder, zone: ZoneInfo, *, late_since: datetime | None = None) -> str:
    """What Parley posts when `reminder` comes due: who set it, and their words quoted; `late_since`: it was due
    then, while Parley was offline."""
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in reminder.text.splitlines())
    every = f" ({describe_every(reminder.every)})" if reminder.every else ""
    if reminder.post_here:
        head = f"\N{ALARM CLOCK} Timed post from <@{reminder.owner_id}>{every}:"
    else:
        head = f"\N{ALARM CLOCK} <@{reminder.owner_id}>, you asked me to remind you{every}:"
    late = "" if late_since is None else f"\n-# (late: due {describe(late_since, zone)}, Parley was offline)"
    return f"{head}\n{quoted}{late}"


def prompt_post_text(schedule: Reminder, answer: str, zone: ZoneInfo, *, late_since: datetime | None = None) -> str:
    """What Parley posts for a scheduled prompt: the model's answer, then a small line saying which schedule it is
    (and, `late_since`, that it was due then, while Parley was offline)."""
    every = f", {describe_every(schedule.every)}" if schedule.every else ""
    late = "" if late_since is None else f"; late: due {describe(late_since, zone)}, Parley was offline"
    return f"{answer}\n-# Scheduled prompt {schedule.id}{every}{late}"


def _count(reminders: int) -> str:
    return f"{reminders} reminder" + ("" if reminders == 1 else "s")
