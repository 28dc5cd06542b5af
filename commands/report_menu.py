""" "Report to moderators" on a message: every member's message command, with an optional reason in a short modal;
the report is filed, read and carded by the client's moderation desk (moderation/desk.py)."""

from __future__ import annotations

import logging
from typing import Protocol, cast

import discord
from discord import app_commands

from commands.tree import send_ephemeral
from moderation.desk import ModerationDesk

log = logging.getLogger("parley.moderation")

REPORT = "Report to moderators"
REASON_ID = "reason"
# A reason, not an essay: the message itself is what the moderators read. Discord allows 4,000.
REASON_MAX_CHARS = 300
# How long an unsubmitted modal is kept (discord.py keeps it in memory until it is submitted or times out).
MODAL_SECONDS = 15 * 60
REPORT_FAILED = "Sorry, your report failed; the details are in Parley's log."


class ReportingClient(Protocol):
    """The client, as "Report to moderators" sees it (bot.py's Parley)."""

    @property
    def moderation(self) -> ModerationDesk: ...


def _desk(interaction: discord.Interaction) -> ModerationDesk:
    return cast(ReportingClient, interaction.client).moderation


def report_menu_command() -> app_commands.ContextMenu:
    """The "Report to moderators" message command (servers only, as the other commands)."""
    command = app_commands.ContextMenu(name=REPORT, callback=_open_report)
    command.guild_only = True
    return command


async def _open_report(interaction: discord.Interaction, message: discord.Message) -> None:
    """Ask the member why in a modal; say in one line why not, if the message cannot be reported here."""
    if interaction.guild_id is None:
        raise app_commands.NoPrivateMessage()
    refusal = await _desk(interaction).report_refusal(interaction, message)
    if refusal is not None:
        await send_ephemeral(interaction, refusal)
        return
    await interaction.response.send_modal(ReportModal(message))


class ReportModal(discord.ui.Modal):
    """Why the member reports one message (optional)."""

    def __init__(self, target: discord.Message) -> None:
        super().__init__(title=REPORT, timeout=MODAL_SECONDS)
        self.target = target
        self.reason: discord.ui.TextInput[ReportModal] = discord.ui.TextInput(
            custom_id=REASON_ID,
            style=discord.TextStyle.paragraph,
            placeholder="Which rule it breaks, or what the moderators should know (optional)",
            max_length=REASON_MAX_CHARS,
            required=False,
        )
        self.add_item(discord.ui.Label(text="Why are you reporting it?", component=self.reason))

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await _desk(interaction).report(interaction, self.target, self.reason.value)

    # discord.py's Modal.on_error takes no item (a modal's failure is its own), unlike the View's it is typed after.
    async def on_error(self, interaction: discord.Interaction, error: Exception, /) -> None:  # type: ignore[override]
        log.error("a report of message %s failed", self.target.id, exc_info=error)
        try:
            await send_ephemeral(interaction, REPORT_FAILED)
        except discord.HTTPException as failure:
            log.warning("could not explain a failed report: %s", failure)
