"""The moderation desk: a member's report filed (one private line back), the case read by the model (which decides
nothing) and its card posted in the moderation channel, and kept up to date as reports and actions come
(actions.py does what its buttons ask)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

import aiohttp
import discord
from pydantic_ai.exceptions import AgentRunError, UsageLimitExceeded

from admission.optout import OptOuts
from admission.spending import Refused
from archive import ArchiveWriteFailed, ModerationLog
from archive.null import archive_off
from config import Settings
from edge.asked_about import AskedAboutReader
from moderation.cards import case_embed, case_view
from moderation.reading import CaseMaterial, CaseReader
from records import MessageReport, ModerationCase, ModerationSettings
from usage.budget import UsageLedger

log = logging.getLogger("parley.moderation")

# What the reporter is told, in one private line.
NOT_TAKEN = "Reports aren't taken in this server: its admins have not chosen a moderation channel."
NO_ARCHIVE = "Reports aren't taken here: they are kept in Parley's archive, which is off."
CANNOT_READ = "You can report only a message in a channel you can read, from that channel."
OWN_MESSAGE = "That is your own message: delete or edit it instead of reporting it."
NO_CARD_CHANNEL = "Reports can't reach the moderators right now: Parley may not post in the moderation channel."
NOT_KEPT = "Your report could not be kept, so the moderators don't have it; the details are in Parley's log."
REPORT_LINES = {
    "opened": "Thanks: the moderators have your report and will review the message.",
    "joined": "Thanks: your report was added to the moderators' case on this message.",
    "repeated": "You already reported this message; the moderators have it.",
    "reviewed": "The moderators have already reviewed this message.",
    "limited": "You have made as many reports as Parley takes in an hour; try again later.",
}
# What a moderator pressing a card's button is told, in one private line.
# Where a reading could not be made: the card says why, in place of the model's summary.
NOT_READ_OPTED_OUT = "Not read: its author opted out of Parley, or erased their data, in this server."
NOT_READ_BUDGET = "Not read: the server has spent its token budget for today."
NOT_READ_FAILED = "Not read: the model could not be reached; the details are in Parley's log."
NOT_READ_NO_MODEL = "Not read: no model is set up for summaries."
# The failures a reading logs in one line before the card is posted without it.
READING_FAILURES = (AgentRunError, UsageLimitExceeded, aiohttp.ClientError, OSError, TimeoutError)


class ModerationStores(Protocol):
    """Where cases are kept (bot.py's OpenStores): the null archive without one."""

    @property
    def archive(self) -> ModerationLog: ...


class ModerationAdmission(Protocol):
    """The one admission path, as a case's reading asks it (admission/gatekeeper.py)."""

    @property
    def optouts(self) -> OptOuts: ...

    async def call_refusal(self, guild_id: int, member_id: int | None) -> Refused | None: ...


class ModerationDesk:
    """The client's moderation desk: reports and their case cards (see the module)."""

    def __init__(
        self,
        settings: Settings,
        stores: ModerationStores,
        admission: ModerationAdmission,
        reader: AskedAboutReader,
        usage: UsageLedger,
        *,
        cases: Callable[[], CaseReader | None],
        get_channel: Callable[[int], object],
        own_id: Callable[[], int],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.admission = admission
        self.reader = reader
        self.usage = usage
        self.cases = cases
        self.get_channel = get_channel
        self.own_id = own_id
        self.clock = clock

    # -- Reports --

    async def report_refusal(self, interaction: discord.Interaction, target: discord.Message) -> str | None:
        """Why the member may not report `target` here, in one line; None when they may."""
        guild = interaction.guild
        if guild is None or archive_off(self.stores.archive):
            return NO_ARCHIVE
        settings = await self.stores.archive.moderation_settings(guild.id)
        if settings.channel_id is None or self.settings.reports_per_member_per_hour == 0:
            return NOT_TAKEN
        if target.channel.id != interaction.channel_id or not interaction.permissions.view_channel:
            return CANNOT_READ
        if target.author.id == interaction.user.id:
            return OWN_MESSAGE
        if self._card_channel(settings) is None:
            return NO_CARD_CHANNEL
        return None

    async def report(self, interaction: discord.Interaction, target: discord.Message, reason: str) -> None:
        """File the member's report of `target` and tell them in one private line; a new case is then read and its
        card posted, a report joining an open case updates its card."""
        refusal = await self.report_refusal(interaction, target)
        if refusal is not None or interaction.guild is None:
            await interaction.response.send_message(refusal or NO_ARCHIVE, ephemeral=True)
            return
        guild_id = interaction.guild.id
        withheld = self.admission.optouts.withheld(guild_id, target.author.id, target.id)
        report = MessageReport(
            guild_id, target.channel.id, target.id, target.author.id, "" if withheld else _text_of(target),
            interaction.user.id, " ".join(reason.split()), self.clock(),
        )  # fmt: skip
        try:
            filed = await self.stores.archive.report_message(report, per_hour=self.settings.reports_per_member_per_hour)
        except ArchiveWriteFailed:
            log.exception("report of message %s could not be kept", target.id)
            await interaction.response.send_message(NOT_KEPT, ephemeral=True)
            return
        await interaction.response.send_message(REPORT_LINES[filed.outcome], ephemeral=True)
        if filed.case is None or filed.outcome not in ("opened", "joined"):
            return
        # What a member who opted out of Parley writes is never shown to the model: their reason stays the moderators'.
        shown = "" if self.admission.optouts.opted_out(guild_id, interaction.user.id) else reason
        try:
            if filed.outcome == "opened":
                reads_history = interaction.permissions.read_message_history
                await self._open(filed.case, target, shown, reads_history=reads_history, withheld=withheld)
            else:
                await self.refresh_card(filed.case.id)
        except (discord.HTTPException, ArchiveWriteFailed):
            # The reporter was told already: the case is kept, and `/parley-admin moderation cases` lists it.
            log.exception("the card of case %s could not be posted", filed.case.id)

    async def _open(
        self, case: ModerationCase, target: discord.Message, reason: str, *, reads_history: bool, withheld: bool
    ) -> None:
        """Read a new case (what the reporter may read of the conversation around it, the rules) and post its card."""
        archive = self.stores.archive
        settings = await archive.moderation_settings(case.guild_id)
        reading = await self._reading(case, target, settings, reason, reads_history=reads_history, withheld=withheld)
        rule, confidence, summary = reading
        await archive.assess_case(case.id, rule, confidence, summary)
        await self.post_card(case.id, settings)

    async def _reading(
        self,
        case: ModerationCase,
        target: discord.Message,
        settings: ModerationSettings,
        reason: str,
        *,
        reads_history: bool,
        withheld: bool,
    ) -> tuple[str, float, str]:
        """The model's rule, confidence and summary; where no reading is made, the line saying why as its summary."""
        reader = self.cases()
        if withheld:
            return "", 0.0, NOT_READ_OPTED_OUT
        if reader is None:
            return "", 0.0, NOT_READ_NO_MODEL
        if await self.admission.call_refusal(case.guild_id, None) is not None:
            return "", 0.0, NOT_READ_BUDGET
        about = await self.reader.read(case.guild_id, target, reads_history=reads_history)
        material = CaseMaterial(about, await self.rules_of(settings), reason)
        try:
            reading, usage = await reader.read(material)
        except READING_FAILURES:
            log.exception("case %s could not be read", case.id)
            return "", 0.0, NOT_READ_FAILED
        self.usage.record(
            case.guild_id, case.channel_id, self.own_id(), usage.input_tokens, usage.output_tokens, kind="summary"
        )
        return reading.rule, reading.confidence, reading.summary

    async def rules_of(self, settings: ModerationSettings) -> str:
        """The server's rules: the knowledge base document marked as the rules, else the text set by command."""
        if settings.rules_document_id is not None:
            text = await self.stores.archive.rules_document(settings.guild_id, settings.rules_document_id)
            if text is not None:
                return text
        return settings.rules

    # -- The card --

    def _card_channel(self, settings: ModerationSettings) -> discord.TextChannel | discord.Thread | None:
        """The moderation channel, if Parley may post its cards there."""
        channel = None if settings.channel_id is None else self.get_channel(settings.channel_id)
        if not isinstance(channel, discord.TextChannel | discord.Thread):
            return None
        allowed = channel.permissions_for(channel.guild.me)
        return channel if allowed.view_channel and allowed.send_messages and allowed.embed_links else None

    async def post_card(self, case_id: int, settings: ModerationSettings) -> None:
        """Post the case's card in the moderation channel and keep where it is."""
        archive = self.stores.archive
        case = await archive.moderation_case(case_id)
        channel = self._card_channel(settings)
        if case is None or channel is None:
            log.warning("the card of case %s was not posted: Parley may not post in the moderation channel", case_id)
            return
        embed = case_embed(case, await archive.case_reports(case_id), await archive.case_actions(case_id))
        view = case_view(case)
        none = discord.AllowedMentions.none()
        card = await (
            channel.send(embed=embed, allowed_mentions=none)
            if view is None
            else channel.send(embed=embed, view=view, allowed_mentions=none)
        )
        await archive.set_case_card(case_id, channel.id, card.id)

    async def refresh_card(self, case_id: int) -> None:
        """Show the case as it stands now on its card (its reporters, what was done, closed)."""
        archive = self.stores.archive
        case = await archive.moderation_case(case_id)
        if case is None or case.card_channel_id is None or case.card_message_id is None:
            return
        channel = self.get_channel(case.card_channel_id)
        if not isinstance(channel, discord.TextChannel | discord.Thread):
            return
        embed = case_embed(case, await archive.case_reports(case_id), await archive.case_actions(case_id))
        try:
            await channel.get_partial_message(case.card_message_id).edit(embed=embed, view=case_view(case))
        except discord.HTTPException as error:
            log.warning("the card of case %s could not be updated: %s", case_id, error)


def _text_of(message: discord.Message) -> str:
    """The message's text as a case keeps it, with its files named."""
    files = "".join(f" [file {attachment.filename}]" for attachment in message.attachments)
    return (message.content + files).strip()
