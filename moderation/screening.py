"""Watch lists: new messages in the channels admins chose (`/parley-admin moderation watch`) that pass the local
pre-filter are read by the model against the rules; one it flags becomes a case card, never an action.

Screening spends its own daily tokens per server (SCREENING_TOKENS_PER_DAY, counted in the archive for every
process), apart from SERVER_TOKENS_PER_DAY: at its budget screening stops until the next UTC midnight and answering
goes on. A spent server budget stops it too (the one admission path). A message its author withheld (opted out, or
erased) is never screened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, date, datetime

import discord

from archive import ArchiveWriteFailed
from archive.null import archive_off
from archive.times import to_day
from config import Settings
from discord_io import to_record
from moderation.desk import READING_FAILURES, ModerationAdmission, ModerationDesk, ModerationStores
from moderation.prefilter import Candidate, PreFilter
from moderation.reading import CaseMaterial, CaseReader
from records import AskedAbout, MessageReport
from upkeep.background import BackgroundTasks

log = logging.getLogger("parley.moderation")

# How sure the model must be that a message breaks a rule for it to become a case.
FLAG_CONFIDENCE = 0.5


class Screening:
    """The watched channels of this process's servers, and the screening of their new messages."""

    def __init__(
        self,
        settings: Settings,
        stores: ModerationStores,
        admission: ModerationAdmission,
        desk: ModerationDesk,
        background: BackgroundTasks,
        *,
        cases: Callable[[], CaseReader | None],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.admission = admission
        self.desk = desk
        self.background = background
        self.cases = cases
        self.clock = clock
        self.prefilter = PreFilter()
        self.watched: dict[int, int] = {}  # channel -> server
        self.words: dict[int, tuple[str, ...]] = {}  # server -> the listed words
        self._budget_told: dict[int, date] = {}

    async def attach(self) -> None:
        """Read the watched channels and listed words (at the start, from the archive)."""
        self.watched = await self.stores.archive.watched_channels()
        for guild_id in set(self.watched.values()):
            await self.reload(guild_id)

    async def reload(self, guild_id: int) -> None:
        """Read one server's watched channels and words again (after a command changed them)."""
        archive = self.stores.archive
        self.watched = {channel: guild for channel, guild in self.watched.items() if guild != guild_id}
        self.watched |= await archive.watched_channels(guild_id)
        self.words[guild_id] = (await archive.moderation_settings(guild_id)).watch_words

    def heard(self, message: discord.Message) -> None:
        """A new message: screened in the background if its channel is watched and it passes the pre-filter."""
        channel_id = getattr(message.channel, "parent_id", None) or message.channel.id
        guild = message.guild
        if (
            channel_id not in self.watched
            or guild is None
            or message.author.bot
            or self.settings.screening_tokens_per_day == 0
        ):
            return
        if self.admission.optouts.withheld(guild.id, message.author.id, message.id):
            return
        joined = getattr(message.author, "joined_at", None)
        candidate = Candidate(
            guild.id, message.channel.id, message.author.id, message.content, len(message.raw_mentions), joined,
            message.created_at,
        )  # fmt: skip
        reasons = self.prefilter.reasons(candidate, self.words.get(guild.id, ()))
        if reasons:
            self.background.start(self.screen(message, reasons), f"screening-{message.id}")

    async def screen(self, message: discord.Message, reasons: list[str]) -> None:
        """Read a message that passed the pre-filter (within the screening budget); a case card if it is flagged."""
        guild = message.guild
        reader = self.cases()
        archive = self.stores.archive
        if guild is None or reader is None or archive_off(archive) or not await self._admitted(guild.id):
            return
        settings = await archive.moderation_settings(guild.id)
        about = AskedAbout(to_record(message))
        reason = "flagged by the watch list for " + "; ".join(reasons)
        try:
            reading, usage = await reader.read(CaseMaterial(about, await self.desk.rules_of(settings), reason))
        except READING_FAILURES:
            log.exception("message %s could not be screened", message.id)
            return
        await archive.add_screening_tokens(guild.id, self._day(), usage.input_tokens + usage.output_tokens)
        if not reading.rule or reading.confidence < FLAG_CONFIDENCE:
            return
        flag = MessageReport(
            guild.id, message.channel.id, message.id, message.author.id, message.content, None, reason, self.clock()
        )
        try:
            filed = await archive.report_message(flag, per_hour=self.settings.reports_per_member_per_hour)
        except ArchiveWriteFailed:
            log.exception("the flag of message %s could not be kept", message.id)
            return
        if filed.outcome == "opened" and filed.case is not None:
            # A flag has no reporter to say why it was screened: its summary does.
            summary = f"{reading.summary} (screened for {'; '.join(reasons)})"
            await archive.assess_case(filed.case.id, reading.rule, reading.confidence, summary)
            await self.desk.post_card(filed.case.id, settings)

    async def _admitted(self, guild_id: int) -> bool:
        """Whether the server's screening budget, and its token budget, admit another screening call."""
        spent = await self.stores.archive.screening_tokens(guild_id, self._day())
        if spent >= self.settings.screening_tokens_per_day:
            if self._budget_told.get(guild_id) != self.clock().date():
                self._budget_told[guild_id] = self.clock().date()
                log.info("server %s has spent its screening tokens for today; screening waits for midnight", guild_id)
            return False
        return await self.admission.call_refusal(guild_id, None) is None

    def _day(self) -> int:
        return to_day(self.clock().astimezone(UTC).date())
