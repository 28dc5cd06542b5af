"""`/parley privacy optout | optin | export | erase`: a member's rights over what Parley holds of them in a server.

Every reply is ephemeral. The rules are admission/optout.py's (opting out) and upkeep/privacy.py's (export,
erasure); this module asks, confirms and answers.
"""

from __future__ import annotations

import io
import logging
from typing import Any, Protocol, cast

import discord
from discord import app_commands

from admission.optout import HasOptOuts
from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off
from commands.tree import Refusal, place_of, send_ephemeral
from conversation import ConversationManager
from upkeep.privacy import (
    DEFAULT_UPLOAD_LIMIT,
    DecisionsKept,
    EndingConversations,
    MemberErasure,
    TodaysUsage,
    export_member,
)

log = logging.getLogger("parley")

# How long the erase button waits for its confirmation; then it is cancelled, and nothing is erased.
ERASE_CONFIRM_SECONDS = 60.0

OPTED_OUT = (
    "You opted out of Parley in this server. From now on it does not archive, summarise, remember or show its model"
    " what you write here (others' conversations show at most “[a message from a member who opted out]” in its"
    " place), and it does not answer you. What it kept before stays until you erase it: `/parley privacy export`"
    " shows it, `/parley privacy erase` deletes it. Your reminders here are cancelled. `/parley privacy optin` undoes"
    " this (but not the cancelling)."
)
OPTED_IN = "You opted back in: Parley archives your messages here again and answers you."
NO_ARCHIVE_NOTE = " (Parley keeps no archive here, so this lasts until it restarts.)"
ERASE_QUESTION = (
    "Erase everything Parley holds by or about you in this server: your archived messages and the text of your"
    " files, the facts remembered about you or told by you, your id on its token counts, the conversation summaries"
    " written from your messages, your reminders, your pinned messages in its knowledge base, and your messages in"
    " its live conversations? Nothing you wrote until now is archived again. This cannot be undone; it does not opt"
    " you out."
)
ERASE_CANCELLED = "Cancelled: nothing was erased."
ERASE_FAILED = "Not everything could be erased (the archive refused a write; see Parley's log): erase again to finish."
NOT_YOURS = "Only the member who asked can confirm or cancel this."
NO_ARCHIVE = "Parley keeps no archive here (DATABASE_URL is empty): it holds nothing of you beyond live conversations."


class MemberPins(Protocol):
    """The pinned messages in the knowledge base (edge/pins.py), as an opt-out or an erasure changes them."""

    def member_opted_out(self, guild_id: int, member_id: int) -> None: ...
    async def forget_member(self, guild_id: int, member_id: int) -> int: ...


class PrivacyClient(Protocol):
    """The client, as these commands see it (bot.py's Parley)."""

    @property
    def archive(self) -> Archive: ...
    @property
    def manager(self) -> ConversationManager: ...
    @property
    def admission(self) -> HasOptOuts: ...
    @property
    def decisions(self) -> DecisionsKept: ...
    @property
    def upkeep(self) -> EndingConversations: ...
    @property
    def usage(self) -> TodaysUsage: ...
    @property
    def pins(self) -> MemberPins: ...

    def guild_of(self, channel_id: int) -> int: ...


def privacy_client(interaction: discord.Interaction) -> PrivacyClient:
    """The client an interaction came to (as `commands.tree.operated`)."""
    client: Any = interaction.client
    return cast(PrivacyClient, client)


class PrivacyCommands(
    app_commands.Group, name="privacy", description="Opt out of Parley here, or see or erase what it holds of you."
):
    """`/parley privacy optout | optin | export | erase`, for any member, about themselves in this server."""

    @app_commands.command(description="Parley stops archiving, remembering and answering your messages here.")
    async def optout(self, interaction: discord.Interaction) -> None:
        await self._set(interaction, True, OPTED_OUT)

    @app_commands.command(description="Parley archives and answers your messages here again.")
    async def optin(self, interaction: discord.Interaction) -> None:
        await self._set(interaction, False, OPTED_IN)

    async def _set(self, interaction: discord.Interaction, opted_out: bool, reply: str) -> None:
        guild_id, _ = place_of(interaction)
        client = privacy_client(interaction)
        try:
            await client.admission.optouts.set(guild_id, interaction.user.id, opted_out)
        except ArchiveWriteFailed:
            raise Refusal("Your choice could not be saved (the archive refused it; see Parley's log).") from None
        if opted_out:  # their pinned messages leave the knowledge base
            client.pins.member_opted_out(guild_id, interaction.user.id)
        if opted_out:  # Parley keeps nothing for them: their reminders go too
            try:
                await client.archive.delete_member_reminders(guild_id, interaction.user.id)
            except ArchiveWriteFailed:
                # Each is dropped when it comes due instead: its owner has opted out by then.
                log.warning("member %s's reminders in server %s could not be deleted", interaction.user.id, guild_id)
        await send_ephemeral(interaction, reply + (NO_ARCHIVE_NOTE if archive_off(client.archive) else ""))

    @app_commands.command(description="A JSON file of everything Parley holds by or about you in this server.")
    async def export(self, interaction: discord.Interaction) -> None:
        guild_id, _ = place_of(interaction)
        archive = privacy_client(interaction).archive
        if archive_off(archive):
            raise Refusal(NO_ARCHIVE)
        # Reading a busy member's archive can outlast Discord's 3 seconds for a first response.
        await interaction.response.defer(ephemeral=True, thinking=True)
        limit = interaction.filesize_limit or DEFAULT_UPLOAD_LIMIT
        export = await export_member(archive, guild_id, interaction.user.id, limit=limit)
        text = (
            f"Everything Parley holds of you in this server: {export.messages} message(s), {export.facts} fact(s),"
            f" {export.usage_rows} token-count row(s)."
        )
        if export.cut:
            text += f" {export.cut} newer message(s) did not fit Discord's upload limit and were left out."
        file = discord.File(io.BytesIO(export.data), filename=f"parley-{guild_id}-{interaction.user.id}.json")
        await interaction.followup.send(text, file=file, ephemeral=True)

    @app_commands.command(description="Delete everything Parley holds by or about you in this server.")
    async def erase(self, interaction: discord.Interaction) -> None:
        guild_id, _ = place_of(interaction)
        view = EraseConfirmation(interaction.user.id, guild_id)
        await interaction.response.send_message(ERASE_QUESTION, view=view, ephemeral=True)
        view.question = interaction


class EraseConfirmation(discord.ui.View):
    """Erase or Cancel, for the member who asked only; unanswered for ERASE_CONFIRM_SECONDS, it cancels."""

    def __init__(self, member_id: int, guild_id: int) -> None:
        super().__init__(timeout=ERASE_CONFIRM_SECONDS)
        self.member_id = member_id
        self.guild_id = guild_id
        # The interaction that asked: its response is the question, changed to say how it ended.
        self.question: discord.Interaction | None = None

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if interaction.user.id == self.member_id:
            return True
        await interaction.response.send_message(NOT_YOURS, ephemeral=True)
        return False

    @discord.ui.button(label="Erase", style=discord.ButtonStyle.danger)
    async def confirm(self, interaction: discord.Interaction, button: discord.ui.Button[EraseConfirmation]) -> None:
        self.stop()
        await interaction.response.edit_message(content="Erasing…", view=None)
        client = privacy_client(interaction)
        erasure = MemberErasure(
            client.archive, client.manager, client.decisions, client.upkeep, client.usage, client.guild_of,
            client.admission.optouts, client.pins,
        )  # fmt: skip
        try:
            erased = await erasure.erase(self.guild_id, self.member_id)
        except ArchiveWriteFailed:
            await interaction.edit_original_response(content=ERASE_FAILED)
            return
        log.info("erased member %s's data in server %s at their request", self.member_id, self.guild_id)
        await interaction.edit_original_response(content=erased.describe())

    @discord.ui.button(label="Cancel", style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: discord.Interaction, button: discord.ui.Button[EraseConfirmation]) -> None:
        self.stop()
        await interaction.response.edit_message(content=ERASE_CANCELLED, view=None)

    async def on_timeout(self) -> None:
        if self.question is not None:
            try:
                await self.question.edit_original_response(content=ERASE_CANCELLED, view=None)
            except discord.HTTPException as error:
                log.warning("could not say an erase request timed out: %s", error)
