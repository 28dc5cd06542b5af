"""`/parley-admin support …`: the support desk of the server's channels; here its `report` (the desk's
`on | off | show` are its other subcommands)."""

from __future__ import annotations

import discord
from discord import app_commands

from commands.support_report import ReportPeriod, answer_support_report


class SupportCommands(
    app_commands.Group, name="support", description="The support desk: questions answered from the documents."
):
    """`/parley-admin support report`, about the server it is used in."""

    @app_commands.command(description="The support desk's questions, answers and feedback (Manage Server or Channels).")
    @app_commands.describe(period="week: the last 7 days (the default); month: the last 30 days")
    async def report(self, interaction: discord.Interaction, period: ReportPeriod = "week") -> None:
        # Manage Server or Manage Channels, which Discord's default permissions cannot say: checked in the command.
        await answer_support_report(interaction, period)
