"""The command tree, what the commands see of the client, and how they reply: one line only its user sees."""

from __future__ import annotations

import logging
from typing import Any, Protocol, cast

import discord
from discord import app_commands
from pydantic_ai.messages import ModelMessage

from admission.access_gate import AccessGate
from archive import Archive
from config import Settings
from conversation import ConversationManager
from deciding.journal import LoggedDecision
from discord_io import split_message
from edge.pins import PinnedKnowledge
from knowledge.base import KnowledgeBase
from memory.store import MemoryStore
from profiles.channels import Profiles
from tools import Toolbox
from upkeep.coverage import Coverage
from usage.budget import UsageLedger

log = logging.getLogger("parley")


class Operated(Protocol):
    """The client, as the /parley commands see it (bot.py's Parley): what they read, and the changes they make."""

    @property
    def settings(self) -> Settings: ...
    @property
    def manager(self) -> ConversationManager: ...
    @property
    def profiles(self) -> Profiles: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def toolbox(self) -> Toolbox: ...
    @property
    def archive(self) -> Archive: ...
    @property
    def memory(self) -> MemoryStore | None: ...
    @property
    def knowledge(self) -> KnowledgeBase | None: ...
    @property
    def shard_count(self) -> int | None: ...
    @property
    def coverage(self) -> Coverage: ...
    @property
    def access(self) -> AccessGate: ...
    @property
    def pins(self) -> PinnedKnowledge: ...

    def mode_of(self, channel_id: int) -> str: ...
    def profile_place(self, channel_id: int) -> tuple[int | None, int]: ...
    async def recent_decisions(self, channel_id: int, count: int) -> list[LoggedDecision]: ...
    async def set_threads(self, channel_id: int, guild_id: int, on: bool) -> None: ...
    async def forget(self, channel_id: int, guild_id: int) -> bool: ...
    def restore_conversation(self, channel_id: int, messages: list[ModelMessage]) -> None: ...


def operated(interaction: discord.Interaction) -> Operated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    client: Any = interaction.client
    return cast(Operated, client)


# A text reply's posts: a bound however long its text (a channel with many saved conversations, say).
EPHEMERAL_MAX_POSTS = 8


class Refusal(app_commands.AppCommandError):
    """A command turned down; its message is the one-line reply."""


class ParleyTree(app_commands.CommandTree):
    """The client's slash commands: one that cannot run says why in one line only its user sees."""

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
