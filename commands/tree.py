"""The command tree, and how the commands reply: one line only its user sees. Each command module declares what it
sees of the client (a Protocol of its own)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord
from discord import app_commands

from admission.access import SERVER_REFUSAL
from discord_io import split_message

log = logging.getLogger("parley")


# A text reply's posts: a bound however long its text (a channel with many saved conversations, say).
EPHEMERAL_MAX_POSTS = 8


class Refusal(app_commands.AppCommandError):
    """A command turned down; its message is the one-line reply."""


class ParleyTree(app_commands.CommandTree):
    """The client's slash commands: one that cannot run says why in one line only its user sees."""

    def __init__(self, client: discord.Client, *, serves: Callable[[int], bool]) -> None:
        super().__init__(client)
        self._serves = serves

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        """Every command, in a server Parley does not serve (ALLOWED_SERVERS, while it leaves it), is refused before
        it runs: an admin's there could otherwise spend tokens too (knowledge, digests)."""
        if interaction.guild_id is not None and not self._serves(interaction.guild_id):
            raise Refusal(SERVER_REFUSAL)
        return True

    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        if isinstance(error, app_commands.CommandInvokeError):
            log.error("/%s failed", _command_name(interaction), exc_info=error.original)
        try:
            await send_ephemeral(interaction, refusal(error, _command_name(interaction)))
        except discord.HTTPException as failure:
            log.warning("could not explain a failed command: %s", failure)


def refusal(error: app_commands.AppCommandError, command: str) -> str:
    """The one line that tells the user why `/command` did not run."""
    if isinstance(error, Refusal):
        return str(error)
    if isinstance(error, app_commands.NoPrivateMessage):
        return "Parley's commands work only in a server channel, not in direct messages."
    if isinstance(error, app_commands.MissingPermissions):
        needed = " and ".join(permission_name(name) for name in error.missing_permissions)
        return f"You need the {needed} permission in this channel to use /{command}."
    if isinstance(error, app_commands.CommandNotFound | app_commands.CommandSignatureMismatch):
        return "This command is out of date; an operator can update Parley's commands with `python bot.py --sync`."
    return "Sorry, that command failed; the details are in Parley's log."


def permission_name(flag: str) -> str:
    """A permission as Discord's clients name it: discord.py's `manage_guild` is "Manage Server" there."""
    return "Manage Server" if flag == "manage_guild" else flag.replace("_", " ").title()


def _command_name(interaction: discord.Interaction) -> str:
    command = interaction.command
    return command.qualified_name if command is not None else "parley"


async def send_ephemeral(interaction: discord.Interaction, text: str, **options: Any) -> None:
    """Answer an interaction with `text` that only its user sees, in as many posts as Discord's limit needs
    (at most EPHEMERAL_MAX_POSTS)."""
    for part in split_message(text, max_posts=EPHEMERAL_MAX_POSTS):
        if interaction.response.is_done():
            await interaction.followup.send(part, ephemeral=True, **options)
        else:
            await interaction.response.send_message(part, ephemeral=True, **options)


def place_of(interaction: discord.Interaction) -> tuple[int, int]:
    """The guild and channel a command was used in (`interaction_check` has refused any other)."""
    assert interaction.guild_id is not None and interaction.channel_id is not None
    return interaction.guild_id, interaction.channel_id


def in_a_server(interaction: discord.Interaction) -> bool:
    """The check each group makes first: guild_only keeps the groups out of DMs in Discord's clients, but a request
    can still say otherwise."""
    if interaction.guild_id is None or interaction.channel_id is None:
        raise app_commands.NoPrivateMessage()
    return True
