"""`/parley-admin support on | off | show | report`: whether Parley answers the questions nobody addressed here from
the server's documents (helpdesk/desk.py), and what the desk did (`report`: commands/support_report.py).

Used in a text channel it is about that channel; used in a forum's post, about the forum (a forum has no message box
of its own, and each of its posts is a question). Turning it on or off takes Manage Channels, checked when the
command runs, as the channel's mode does. It is kept in the archive, as the documents are.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed
from archive.null import archive_off
from commands.support_report import ReportPeriod, answer_support_report
from commands.tree import Refusal, place_of, send_ephemeral
from config import Settings
from helpdesk.desk import SupportDesk

# Its replies name the staff role, and ping no one.
QUIET = {"allowed_mentions": discord.AllowedMentions.none()}
NO_ARCHIVE = "Support mode answers from the knowledge base, which is kept in the archive: set DATABASE_URL to use it."
NOT_SAVED = "Support mode could not be saved, so it is unchanged; the details are in Parley's log."
NOT_HERE = (
    "Support mode is for text channels and forums: use this command in the channel, or in one of the forum's posts."
)


class SupportOperated(Protocol):
    """The client, as `/parley-admin support` sees it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def desk(self) -> SupportDesk: ...


def _client(interaction: discord.Interaction) -> SupportOperated:
    client: Any = interaction.client
    operated = cast(SupportOperated, client)
    if archive_off(operated.desk.stores.archive):
        raise Refusal(NO_ARCHIVE)
    return operated


def support_place(channel: object) -> tuple[int, bool]:
    """The channel support mode is set for where the command is used (itself, or a post's forum), and whether it is
    a forum; a refusal anywhere else (a thread, a voice channel)."""
    if isinstance(channel, discord.Thread) and isinstance(channel.parent, discord.ForumChannel):
        return channel.parent.id, True
    if isinstance(channel, discord.TextChannel):
        return channel.id, False
    raise Refusal(NOT_HERE)


class SupportCommands(
    app_commands.Group, name="support", description="Answer the questions nobody addressed here from the documents."
):
    """`/parley-admin support on | off | show`, about the channel (or the forum) they are used in, and `report`,
    about the server."""

    @app_commands.command(
        description="Answer the questions nobody addressed here, from the documents (Manage Channels)."
    )
    @app_commands.checks.has_permissions(manage_channels=True)
    async def on(self, interaction: discord.Interaction) -> None:
        client = _client(interaction)
        channel_id, forum = support_place(interaction.channel)
        await _set(client.desk, interaction, channel_id, on=True)
        await send_ephemeral(interaction, describe_support_on(channel_id, forum, client.settings), **QUIET)

    @app_commands.command(description="Stop answering the questions nobody addressed here (Manage Channels).")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def off(self, interaction: discord.Interaction) -> None:
        client = _client(interaction)
        channel_id, _ = support_place(interaction.channel)
        if channel_id not in client.desk.channels:
            await send_ephemeral(interaction, f"<#{channel_id}> is not in support mode.")
            return
        await _set(client.desk, interaction, channel_id, on=False)
        await send_ephemeral(interaction, f"<#{channel_id}> is no longer in support mode: @mentions work as ever.")

    @app_commands.command(description="Whether Parley answers the questions nobody addressed here, and how.")
    async def show(self, interaction: discord.Interaction) -> None:
        client = _client(interaction)
        channel_id, forum = support_place(interaction.channel)
        if channel_id not in client.desk.channels:
            await send_ephemeral(
                interaction, f"<#{channel_id}> is not in support mode (`/parley-admin support on` here turns it on)."
            )
            return
        await send_ephemeral(interaction, describe_support_on(channel_id, forum, client.settings), **QUIET)

    @app_commands.command(description="The support desk's questions, answers and feedback (Manage Server or Channels).")
    @app_commands.describe(period="week: the last 7 days (the default); month: the last 30 days")
    async def report(self, interaction: discord.Interaction, period: ReportPeriod = "week") -> None:
        # Manage Server or Manage Channels, which Discord's default permissions cannot say: checked in the command.
        await answer_support_report(interaction, period)


async def _set(desk: SupportDesk, interaction: discord.Interaction, channel_id: int, *, on: bool) -> None:
    guild_id, _ = place_of(interaction)
    try:
        await desk.set_support(channel_id, guild_id, on, set_by=interaction.user.id)
    except ArchiveWriteFailed:
        raise Refusal(NOT_SAVED) from None


def describe_support_on(channel_id: int, forum: bool, settings: Settings) -> str:
    """What `/parley-admin support on` and `show` say of a channel in support mode."""
    wait = f"{settings.support_wait_seconds:g} seconds"
    asked = "each new post" if forum else "a message that asks something and addresses nobody"
    lines = [
        f"<#{channel_id}> is in support mode: {asked} is answered from the server's documents when nobody else has"
        f" answered it within {wait} and the documents cover it (KNOWLEDGE_ANSWER_THRESHOLD"
        f" {settings.knowledge_answer_threshold:g}), citing the section; otherwise Parley stays out."
        " `/parley why` shows each decision."
    ]
    if forum:
        minutes = f"{settings.support_handoff_minutes:g} minutes"
        role = settings.support_staff_role
        lines.append(
            f"A post nobody answered after {minutes} that the documents don't cover is handed to <@&{role}>."
            if role is not None
            else f"A post nobody answered after {minutes} is handed to no one: SUPPORT_STAFF_ROLE is not set."
        )
    return "\n".join(lines)
