"""Posting reminders at their time: one task per process, asleep until the soonest reminder of its shards comes due;
the one scheduler of timed posts, which also answers scheduled prompts (answering/scheduled.py) and ticks the digests.

It wakes when that time comes, when a reminder is set here (`ReminderBook.added`: the new one may be sooner), and
at least every POLL_SECONDS (a clock that jumped, a reminder a process on another shard count set). For each due
reminder it checks the owner may still use Parley there (access lists, opt-out: else the reminder is dropped,
with a log line), then claims it in the archive (archive/reminders.py) and posts it only if its claim stood: of
several processes that find it due, one posts. A one-off is deleted once posted; a recurring one's claim has
moved it on to its next time to come, so one missed several times while Parley was away posts once, marked late.
A failed post is tried again on later passes, a few times (no pass waits for it), and one reminder's failure holds
up none of the others; nothing stops the task. Time comes from the book's clock, so tests
move it on instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from archive import ArchiveWriteFailed, Reminder, ReminderTable, Shards
from archive.null import archive_off
from reminders.book import ReminderBook, post_text, prompt_post_text
from reminders.when import next_time

log = logging.getLogger("parley.reminders")

POLL_SECONDS = 60.0
# Due reminders read at a time; the next batch is read once these are posted.
DUE_AT_ONCE = 50
# Past its time by more than this, a reminder is posted marked late: Parley was offline (or stopped) meanwhile.
LATE_AFTER = timedelta(minutes=1)
# Pauses before each further try of a failed post (kept in memory: the claim took it off the due reminders).
RETRY_SECONDS = (2.0, 10.0)
# A reminder whose owner's roles could not be read is looked at again after this, not at once (no busy loop).
UNKNOWN_RETRY = timedelta(minutes=1)


class PostRefused(Exception):
    """Discord will not take the post (the channel is gone, or Parley may not post there): not tried again.
    `gone`: the channel is no more, so a recurring reminder there is deleted too."""

    def __init__(self, why: str, *, gone: bool = False) -> None:
        super().__init__(why)
        self.gone = gone


class OwnerUnknown(Exception):
    """Discord cannot say now whether the owner may still have the reminder (their roles could not be read): the
    reminder is kept and looked at again later."""


class ReminderPoster(Protocol):
    """The Discord side of a reminder's delivery (edge/reminder_posts.py)."""

    async def wait_until_ready(self) -> None:
        """Return once Discord's servers are known (before then no member's roles can be read)."""
        ...

    async def refusal(self, reminder: Reminder) -> str | None:
        """Why the reminder's owner may no longer have it posted (blocked, opted out), or None.

        Raises:
            OwnerUnknown: Discord cannot say now.
        """
        ...

    async def post(self, reminder: Reminder, text: str) -> None:
        """Post `text` in the reminder's channel, pinging its owner alone for a reminder, no one for a timed post.

        Raises:
            PostRefused: Discord refuses it for good. Any other exception is worth another try.
        """
        ...


class PromptRunner(Protocol):
    """The model's side of a scheduled prompt (answering/scheduled.py)."""

    async def answer(self, schedule: Reminder) -> str | None:
        """The model's answer to the prompt in its channel, or None (said in one log line) when there is none."""
        ...


class TimedWork(Protocol):
    """Other work that comes due at set times, ticked by this one scheduler (upkeep/digests.py's digests)."""

    async def tick(self) -> float:
        """Do what is due now (never raising); how many seconds may pass until more is due."""
        ...


class ReminderScheduler:
    """The one scheduler of timed posts: the task that posts the reminders of this process's `shards` when they come
    due, the answers of its scheduled prompts (`prompts`; None: they are not run), and ticks the `timed_work` (the
    digests) when theirs is due."""

    def __init__(
        self,
        book: ReminderBook,
        poster: ReminderPoster,
        shards: Shards,
        *,
        retry_seconds: Sequence[float] = RETRY_SECONDS,
        prompts: PromptRunner | None = None,
        timed_work: Sequence[TimedWork] = (),
    ) -> None:
        self.book = book
        self.poster = poster
        self.shards = shards
        self.retry_seconds = retry_seconds
        self.prompts = prompts
        self.timed_work = tuple(timed_work)
        # Scheduled prompts' runs and the timed work's ticks under way: model calls no pass waits for.
        self._runs: set[asyncio.Task[None]] = set()
        # When each timed work is next due (None: at the next pass), which of them are ticking, and which were woken
        # while they ticked (they tick again at once after).
        self._work_due: list[datetime | None] = [None] * len(self.timed_work)
        self._ticking: set[int] = set()
        self._woken: set[int] = set()
        # Set after each pass over the due reminders: a test waits for it after moving the clock on.
        self.passed = asyncio.Event()
        # Reminders left for a later pass (reminder id -> not before): their owner's roles were unknown, or their
        # check failed.
        self._later: dict[int, datetime] = {}
        # Claimed reminders whose post failed, by id, to be tried again on a later pass.
        self._retries: dict[int, _Pending] = {}

    def wake(self) -> None:
        """Look for due reminders now (a test that moved the clock on)."""
        self.book.added.set()

    def wake_timed_work(self) -> None:
        """Tick the timed work at the next pass, now (a digest was set or changed; a test moved the clock on)."""
        self._woken.update(self._ticking)
        self._work_due = [None] * len(self.timed_work)
        self.book.added.set()

    async def run(self, archive: ReminderTable) -> None:
        """Post reminders as they come due, until cancelled; without an archive there are none."""
        if archive_off(archive):
            return
        self.book.archive = archive
        await self.poster.wait_until_ready()
        while True:
            self.book.added.clear()
            self._tick_timed_work()
            try:
                await self._post_due(archive)
                wait = await self._until_next(archive)
            except Exception:  # an archive failure: try again later, never stop posting reminders
                log.exception("reminders: the due reminders could not be read or claimed")
                wait = POLL_SECONDS
            wait = min([wait, *self._work_waits()])
            self.passed.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self.book.added.wait()

    def _tick_timed_work(self) -> None:
        """Start the tick of each timed work that is due and not ticking already, in a task of its own (a digest's
        model calls take seconds; no reminder waits for them)."""
        now = self.book.clock()
        for index, work in enumerate(self.timed_work):
            due = self._work_due[index]
            if index in self._ticking or (due is not None and due > now):
                continue
            self._ticking.add(index)
            task = asyncio.create_task(self._tick_work(index, work))
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)

    async def _tick_work(self, index: int, work: TimedWork) -> None:
        wait = POLL_SECONDS
        try:
            wait = await work.tick()
        except Exception:  # its contract is never to raise; if it does, it is tried again in a while, not at once
            log.exception("scheduler: a tick of %s failed", type(work).__name__)
        finally:
            self._ticking.discard(index)
        woken = index in self._woken
        self._woken.discard(index)
        self._work_due[index] = None if woken else self.book.clock() + timedelta(seconds=wait)
        self.book.added.set()  # its next time may come before the pass's sleep ends

    def _work_waits(self) -> list[float]:
        """Seconds until each timed work not ticking now is due."""
        now = self.book.clock()
        return [
            max((due - now).total_seconds(), 0.0) if due is not None else 0.0
            for index, due in enumerate(self._work_due)
            if index not in self._ticking
        ]

    async def _until_next(self, archive: ReminderTable) -> float:
        now = self.book.clock()
        times = [pending.at for pending in self._retries.values()]
        soonest = await archive.next_reminder_due(self.shards)
        if soonest is not None:
            if soonest <= now and self._later:
                soonest = min(self._later.values())  # what is due now was left for later: wait for that
            times.append(soonest)
        if not times:
            return POLL_SECONDS
        return min(max((min(times) - now).total_seconds(), 0.0), POLL_SECONDS)

    async def _post_due(self, archive: ReminderTable) -> None:
        while True:
            now = self.book.clock()
            due = await archive.due_reminders(now, self.shards, DUE_AT_ONCE)
            ready = [reminder for reminder in due if self._later.get(reminder.id, now) <= now]
            for reminder in ready:
                self._later.pop(reminder.id, None)
                try:
                    await self._deliver(archive, reminder, now)
                except Exception:  # one reminder's failure (its check, its claim) holds up none of the others
                    log.exception("reminder %s could not be delivered; tried again later", reminder.id)
                    self._later[reminder.id] = now + UNKNOWN_RETRY
            if len(due) < DUE_AT_ONCE or not ready:  # a batch all left for later would be read again and again
                break
        await self._post_retries(archive)

    async def _deliver(self, archive: ReminderTable, reminder: Reminder, now: datetime) -> None:
        """Check, claim and post one due reminder; a one-off is deleted after its post (or its last try), a
        recurring one when its channel is gone."""
        try:
            refusal = await self.poster.refusal(reminder)
        except OwnerUnknown as unknown:
            log.info("reminder %s kept for later: %s", reminder.id, unknown, extra={"reminder_id": reminder.id})
            self._later[reminder.id] = now + UNKNOWN_RETRY
            return
        if refusal is not None:
            log.info("reminder %s dropped: %s", reminder.id, refusal, extra={"reminder_id": reminder.id})
            await archive.delete_reminder(reminder.id)
            return
        then = next_time(reminder.due_at, reminder.every, after=now, zone=self.book.zone) if reminder.every else None
        if not await archive.claim_reminder(reminder, uuid.uuid4().hex, now, then):
            log.info("reminder %s is taken by another process", reminder.id, extra={"reminder_id": reminder.id})
            return
        late = reminder.due_at if now - reminder.due_at > LATE_AFTER else None
        if reminder.prompt:
            self._start_run(archive, reminder, late, once=then is None)
            return
        text = post_text(reminder, self.book.zone, late_since=late)
        await self._post(archive, _Pending(reminder, text, once=then is None, tries=0, at=now), now)

    def _start_run(self, archive: ReminderTable, schedule: Reminder, late: datetime | None, *, once: bool) -> None:
        """Answer a claimed scheduled prompt in a task of its own (a model call takes seconds; no pass waits for it),
        then post the answer as a timed post is."""
        task = asyncio.create_task(self._run(archive, schedule, late, once=once))
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _run(self, archive: ReminderTable, schedule: Reminder, late: datetime | None, *, once: bool) -> None:
        try:
            text = await self._prompt_post(schedule, late)
        except Exception:  # never lost in a task nobody awaits: the next time is tried as usual
            log.exception("scheduled prompt %s failed; tried again at its next time", schedule.id)
            return
        if text is None:
            return
        now = self.book.clock()
        await self._post(archive, _Pending(schedule, text, once=once, tries=0, at=now), now)
        self.book.added.set()  # a failed post waits for its retry in a later pass

    async def _prompt_post(self, schedule: Reminder, late: datetime | None) -> str | None:
        """What to post for `schedule` now: the model's answer with its schedule line, or None when there is none."""
        answer = None if self.prompts is None else await self.prompts.answer(schedule)
        return None if answer is None else prompt_post_text(schedule, answer, self.book.zone, late_since=late)

    async def runs_finished(self) -> None:
        """Wait for the scheduled prompts' runs under way (a test, after moving the clock on)."""
        while self._runs:
            await asyncio.gather(*self._runs)

    async def run_now(self, schedule: Reminder) -> bool:
        """Answer `schedule` now (`/parley-admin schedule run`) and post it, leaving its times as they are; whether
        there was an answer to post. Its post is tried once: the admin who asked is told if it failed.

        Raises:
            PostRefused: Discord will not take the post.
        """
        text = await self._prompt_post(schedule, None)
        if text is None:
            return False
        await self.poster.post(schedule, text)
        log.info("scheduled prompt %s run now in channel %s", schedule.id, schedule.channel_id)
        return True

    async def _post_retries(self, archive: ReminderTable) -> None:
        """Try again the failed posts whose pause has passed (all of them at once when the pauses are 0)."""
        while due := [pending for pending in self._retries.values() if pending.at <= self.book.clock()]:
            for pending in due:
                del self._retries[pending.reminder.id]
                await self._post(archive, pending, self.book.clock())

    async def _post(self, archive: ReminderTable, pending: _Pending, now: datetime) -> None:
        """Post once; a failure Discord may get over is tried again on a later pass, after the next of
        `retry_seconds` (no pass waits for it), and logged after the last try."""
        reminder = pending.reminder
        pending.tries += 1
        try:
            await self.poster.post(reminder, pending.text)
        except PostRefused as refused:
            log.warning("reminder %s not posted: %s", reminder.id, refused, extra={"reminder_id": reminder.id})
            await self._posted(archive, pending, gone=refused.gone)
        except Exception as error:  # noqa: BLE001 - Discord failed: try again later, then give up; never stop the task
            if pending.tries <= len(self.retry_seconds):
                pending.at = now + timedelta(seconds=self.retry_seconds[pending.tries - 1])
                self._retries[reminder.id] = pending
                return
            log.warning(
                "reminder %s not posted after %d tries: %s: %s",
                reminder.id,
                pending.tries,
                type(error).__name__,
                error,
                extra={"reminder_id": reminder.id},
            )
            await self._posted(archive, pending, gone=False)
        else:
            log.info("reminder %s posted in channel %s", reminder.id, reminder.channel_id)
            await self._posted(archive, pending, gone=False)

    async def _posted(self, archive: ReminderTable, pending: _Pending, *, gone: bool) -> None:
        """Done with a post: a one-off is deleted, and so is a recurring one whose channel is gone."""
        if not (pending.once or gone):
            return
        try:
            await archive.delete_reminder(pending.reminder.id)
        except ArchiveWriteFailed:
            # Its claim keeps it from being posted again; the archive's retention prunes it.
            log.warning("reminder %s was posted but could not be deleted", pending.reminder.id)


@dataclass(slots=True)
class _Pending:
    """A claimed reminder's post, until it is posted, refused or given up on; `at`: when to try it (again)."""

    reminder: Reminder
    text: str
    once: bool
    tries: int
    at: datetime
