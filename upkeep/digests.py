"""Channel digests: at a set hour each day (or week), a catch-up of what the channel said in the period before,
posted in the channel (`/parley-admin digest on`).

The reminders' scheduler (reminders/scheduler.py: one scheduler for every timed post) ticks the digests on each of its
passes (`DigestScheduler.tick`), which read the digests from the archive and say when the next is due, or within a
minute: a change made by command, in this process or
another sharing the archive, is seen without a restart. A digest is due at its hour (in TIMEZONE) and covers the
period from the previous due moment to this one. Only a process serving the channel's server tries it (a process
knows only its own shards' servers), and it first claims the period in the archive (archive/digests.py): the
period is posted once, whatever the restarts and however many processes share the archive. A digest whose hour
passed while Parley was down is posted when it is back within the same period, saying it is late; an older one is
left out. Nothing said by a member in the period: no post and no model call. The writing is the catch-up's
(catchup/), without the "Asked of you" part, reading the channel itself (forget markers and opt-outs apply), and
the post pings no one.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

import aiohttp
import discord
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.usage import RunUsage

from admission.optout import OptOuts
from admission.spending import Spending
from archive import ArchiveWriteFailed, ChannelSettingsStore, Digest, Digests, MessageLog
from catchup.reading import MAX_MESSAGES, Range, Since, id_at, read_range
from catchup.writing import CatchUpWriter, Summary
from config import Settings
from conversation import utc_now
from discord_io import discord_time, split_message, topic_lines
from upkeep.ticks import Ticks
from usage.budget import UsageLedger

log = logging.getLogger("parley.digests")

DAILY, WEEKLY = "daily", "weekly"
EVERY = (DAILY, WEEKLY)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# The longest the task sleeps: a digest set or changed by another process is seen within this.
MAX_WAIT_SECONDS = 60.0
# A digest posted this long after its hour says it is late (Parley was down at the hour).
LATE_AFTER = timedelta(minutes=15)
# A digest's posts: the summary of a busy week fills a few.
DIGEST_MAX_POSTS = 6


# --- When a digest is due ---------------------------------------------------------------------


def _at(day: date, hour: int, zone: ZoneInfo) -> datetime:
    """`hour` on `day` in `zone`, in UTC: Python subtracts and compares datetimes of one zone by their wall clocks."""
    return datetime.combine(day, time(hour), tzinfo=zone).astimezone(UTC)


def _step(digest: Digest) -> timedelta:
    """A period's length in calendar days: 24 hours but across a change of the clocks."""
    return timedelta(days=7 if digest.every == WEEKLY else 1)


def latest_due(digest: Digest, now: datetime, zone: ZoneInfo) -> datetime:
    """The latest moment at or before `now` the digest was due: its hour in `zone`, on its weekday if weekly."""
    day = now.astimezone(zone).date()
    if digest.every == WEEKLY:
        day -= timedelta(days=(day.weekday() - digest.weekday) % 7)
    due = _at(day, digest.hour, zone)
    return due if due <= now else _at(day - _step(digest), digest.hour, zone)


def next_due(digest: Digest, now: datetime, zone: ZoneInfo) -> datetime:
    """The first moment after `now` the digest is due."""
    return _at(latest_due(digest, now, zone).astimezone(zone).date() + _step(digest), digest.hour, zone)


def period_start(digest: Digest, due: datetime, zone: ZoneInfo) -> datetime:
    """Where the period whose digest is due at `due` starts: the previous due moment."""
    return _at(due.astimezone(zone).date() - _step(digest), digest.hour, zone)


def period_of(moment: datetime) -> int:
    """A period as the archive keeps it: the moment its digest is due, in ms since the epoch."""
    return int(moment.timestamp() * 1000)


def schedule_text(digest: Digest, zone: ZoneInfo) -> str:
    """ "daily at 09:00 (Europe/Paris)", "weekly on Monday at 18:00 (UTC)"."""
    on = f" on {WEEKDAYS[digest.weekday].capitalize()}" if digest.every == WEEKLY else ""
    return f"{digest.every}{on} at {digest.hour:02d}:00 ({zone.key})"


# --- What the scheduler is handed -------------------------------------------------------------


class DigestArchive(MessageLog, ChannelSettingsStore, Digests, Protocol):
    """What a digest reads and keeps: the channel's messages, its forget marker, the digests."""


class DigestAgents(Protocol):
    @property
    def catchup(self) -> CatchUpWriter | None: ...


class DigestAdmission(Protocol):
    """The one admission path, as a digest asks it (admission/gatekeeper.py)."""

    @property
    def optouts(self) -> OptOuts: ...

    async def unasked_admitted(self, guild_id: int, what: str) -> bool: ...
    def spending(self, guild_id: int, member_id: int | None, role_ids: Collection[int]) -> Spending: ...


class DigestStores(Protocol):
    """Where the digests are kept (bot.py's OpenStores): the null archive without one."""

    @property
    def archive(self) -> DigestArchive: ...


# The failures a digest logs in one line before the loop goes on: the model's, Discord's, the network's, the archive's.
DIGEST_FAILURES = (AgentRunError, discord.HTTPException, aiohttp.ClientError, OSError, ArchiveWriteFailed)


class DigestScheduler:
    """The one task that posts the channels' digests when they are due; `clock` is the time it reads."""

    def __init__(
        self,
        settings: Settings,
        stores: DigestStores,
        agents: DigestAgents,
        admission: DigestAdmission,
        usage: UsageLedger,
        *,
        own_user: Callable[[], discord.ClientUser | None],
        get_guild: Callable[[int], discord.Guild | None],
        wake_scheduler: Callable[[], None],
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.agents = agents
        self.admission = admission
        self.usage = usage
        # Parley's own user (its posts are left out of a digest), and a server of this process's: discord.py's.
        self.own_user = own_user
        self.get_guild = get_guild
        self.clock = clock
        # This process, in the archive's claims: unique per run, like answering/gap.py's.
        self.claimant = uuid.uuid4().hex
        # Its ticks are the reminders' scheduler's (reminders/scheduler.py's `TimedWork`): one scheduler for every
        # timed post, woken by `wake_scheduler`.
        self._ticks = Ticks("digests", longest=MAX_WAIT_SECONDS, waker=wake_scheduler)
        self._wait = MAX_WAIT_SECONDS

    def wake(self) -> None:
        """Tick now (a digest was set or changed here) rather than at the next due time."""
        self._ticks.wake()

    async def next_tick(self) -> None:
        """Wake the scheduler and wait until a tick that began after this call has finished (a test moves the clock,
        then awaits this instead of sleeping)."""
        await self._ticks.next_tick()

    async def tick(self) -> float:
        """Post the digests due now; how many seconds may pass until the next is due (at most a minute)."""
        return await self._ticks.tick_once(self._tick_and_wait)

    async def _tick_and_wait(self) -> float:
        await self._tick()
        return self._wait

    async def _tick(self) -> None:
        self._wait = MAX_WAIT_SECONDS
        archive = self.stores.archive
        if self.agents.catchup is None:
            return
        now, zone = self.clock(), self.settings.zone
        for digest in await archive.digests():
            self._wait = min(self._wait, (next_due(digest, now, zone) - now).total_seconds())
            due = latest_due(digest, now, zone)
            # Another process's server (its shards are not this process's) is left to that process.
            guild = self.get_guild(digest.guild_id)
            if digest.last_period >= period_of(due) or guild is None:
                continue
            try:
                if await archive.claim_digest(digest, period_of(due), self.claimant):
                    await self._post(archive, digest, guild, due, now)
            except discord.Forbidden as error:
                await self._switch_off(archive, digest, f"Discord refused the post ({error.text or error.status})")
            except DIGEST_FAILURES as error:
                log.warning("digest of channel %s for %s not posted: %s", digest.channel_id, due.isoformat(), error)
        self._wait = max(self._wait, 0.0)

    async def _post(
        self, archive: DigestArchive, digest: Digest, guild: discord.Guild, due: datetime, now: datetime
    ) -> None:
        """Post the claimed digest of the period due at `due`, unless nothing was said in it or the server's budget
        is spent; a channel Parley can no longer post in has its digest switched off."""
        channel = guild.get_channel(digest.channel_id)
        if not isinstance(channel, discord.TextChannel | discord.VoiceChannel | discord.StageChannel):
            log.warning("digest of channel %s not posted: Parley does not see the channel", digest.channel_id)
            return
        allowed = channel.permissions_for(guild.me)
        if not (allowed.view_channel and allowed.send_messages):
            await self._switch_off(archive, digest, "Parley may not post there")
            return
        start = period_start(digest, due, self.settings.zone)
        found = await self._period_messages(archive, digest, start, due)
        if not any(not message.is_bot for message in found.messages):
            log.info("digest of channel %s for %s skipped: nothing was said", digest.channel_id, due.isoformat())
            return
        writer = self.agents.catchup
        if writer is None or not await self.admission.unasked_admitted(guild.id, f"digest of channel {channel.id}"):
            return
        try:
            summary = await writer.summarise(
                found.messages,
                budget_tokens=self.settings.catchup_token_budget,
                on_usage=self._usage_recorder(guild.id, channel.id),
                progress=_no_progress,
                # Asked for by no member: each part's model call asks the server's budget alone.
                admitted=self.admission.spending(guild.id, None, ()).admits,
            )
        except DIGEST_FAILURES:
            # A model or network failure, before anything was posted: give the period back so that the next tick
            # tries it again, rather than losing it for good.
            await archive.release_digest(digest, period_of(due), self.claimant)
            raise
        text = describe_digest(digest, summary, found, start, late_since=due if now - due > LATE_AFTER else None)
        none = discord.AllowedMentions.none()
        for part in split_message(text, max_posts=DIGEST_MAX_POSTS):
            await channel.send(part, allowed_mentions=none, suppress_embeds=True)
        log.info("digest of channel %s for %s posted", digest.channel_id, due.isoformat())

    async def _period_messages(self, archive: DigestArchive, digest: Digest, start: datetime, due: datetime) -> Range:
        """The channel's archived messages of the period, after any forget, with Parley's own posts left out (its
        earlier digests above all) and what members who opted out wrote as placeholders."""
        found = await read_range(
            archive,
            digest.channel_id,
            Since(id_at(start) - 1, "the previous digest"),
            member_id=0,
            forgotten_after=await archive.forget_marker(digest.channel_id),
            before_id=id_at(due),
        )
        user = self.own_user()
        own_id = user.id if user is not None else None
        said = [message for message in found.messages if message.author_id != own_id]
        return replace(found, messages=self.admission.optouts.veil_archived(digest.guild_id, said))

    def _usage_recorder(self, guild_id: int, channel_id: int) -> Callable[[RunUsage], None]:
        """A digest's tokens count for its server, under Parley's own id: no member asked for them."""
        user = self.own_user()
        own_id = user.id if user is not None else 0

        def record(usage: RunUsage) -> None:
            self.usage.record(guild_id, channel_id, own_id, usage.input_tokens, usage.output_tokens, kind="summary")

        return record

    async def _switch_off(self, archive: DigestArchive, digest: Digest, why: str) -> None:
        log.warning("digest of channel %s switched off: %s", digest.channel_id, why)
        with contextlib.suppress(ArchiveWriteFailed):  # then it is tried, and switched off, again next period
            await archive.clear_digest(digest.channel_id)


async def _no_progress(done: int, total: int) -> None:
    """A digest shows no progress: nobody waits on it."""


def describe_digest(
    digest: Digest, summary: Summary, found: Range, start: datetime, *, late_since: datetime | None
) -> str:
    """The digest's post: how much was said since when, the points by topic with their jump links, what was left
    out, and whether it is late."""
    count = len(found.messages)
    lines = [f"**{digest.every.capitalize()} digest: {count:,} messages since <t:{int(start.timestamp())}:f>.**"]
    lines.extend(topic_lines(summary.points, digest.guild_id, digest.channel_id))
    if not summary.points:
        lines.append("Nothing in it stood out to summarise.")
    if summary.left_out:
        lines.append(f"\n-# The {summary.left_out:,} oldest were left out, to stay within the token budgets.")
    if summary.stopped_before:
        lines.append(
            f"\n-# The newest {summary.stopped_before:,} are not summarised: the server used up its token budget."
        )
    if found.more:
        lines.append(f"\n-# Only the newest {MAX_MESSAGES:,} messages were read.")
    if late_since is not None:
        lines.append(f"\n-# Posted late: Parley was not running when it was due, {discord_time(late_since)}.")
    return "\n".join(lines)
