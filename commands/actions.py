"""`/parley-admin actions on | off <action>` and `show`: which server actions Parley may take in this server when a
member asks (pin, unpin, thread, slowmode, delete, timeout: tools/server_actions.py).

Turning one on or off takes Manage Server. Every action is on until turned off; the switches are kept in the archive
and read again by each action as it runs, so one turned off while a request waits for its Approve is not taken.
"""

from __future__ import annotations

from typing import Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed, StateStore
from archive.null import archive_off
from commands.tree import Refusal, place_of, send_ephemeral
from config import Settings
from tools.action_switches import ArchivedSwitches
from tools.channel_actions import NEEDS, SERVER_ACTIONS, ServerAction, permission_name

NO_ARCHIVE = "The server actions' switches are kept in the archive, which is off here (DATABASE_URL is empty)."
NOT_SAVED = "The switch could not be saved, so it is unchanged; the details are in Parley's log."
SETTING_OFF = "This deploy offers no server actions (SERVER_ACTIONS is off), whatever is switched here."


class ActionsOperated(Protocol):
    """The client, as `/parley-admin actions` sees it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def archive(self) -> StateStore: ...


def _switches(interaction: discord.Interaction) -> tuple[ActionsOperated, ArchivedSwitches]:
    client = cast(ActionsOperated, interaction.client)
    if archive_off(client.archive):
        raise Refusal(NO_ARCHIVE)
    return client, ArchivedSwitches(client.archive)


def describe_switches(off: frozenset[str], settings: Settings) -> str:
    """Each action, on or off in the server, with the permission its asker needs."""
    lines = [
        f"- `{action}`: {'off' if action in off else 'on'}"
        f" (the asker needs {' or '.join(permission_name(p) for p in NEEDS[action].asker)})"
        for action in SERVER_ACTIONS
    ]
    if not settings.server_actions_enabled:
        lines.append(SETTING_OFF)
    return "\n".join(["Server actions Parley takes on a member's request, after their Approve:", *lines])


class ActionsCommands(
    app_commands.Group, name="actions", description="The server actions Parley may take here when a member asks."
):
    """`/parley-admin actions on | off <action>` and `show`, for the server they are used in."""

    async def _switch(self, interaction: discord.Interaction, action: ServerAction, *, on: bool) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if action not in SERVER_ACTIONS:
            raise Refusal(f"Unknown action {action!r}: choose {', '.join(SERVER_ACTIONS)}.")
        client, switches = _switches(interaction)
        guild_id, _ = place_of(interaction)
        try:
            await switches.switch(guild_id, action, on=on)
        except ArchiveWriteFailed:
            raise Refusal(NOT_SAVED) from None
        said = "takes" if on else "no longer takes"
        note = "" if client.settings.server_actions_enabled else f" {SETTING_OFF}"
        await send_ephemeral(interaction, f"Parley {said} `{action}` in this server when a member asks.{note}")

    @app_commands.command(description="Let Parley take this action here when a member asks (Manage Server).")
    @app_commands.describe(action="pin, unpin, thread, slowmode, delete or timeout")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def on(self, interaction: discord.Interaction, action: ServerAction) -> None:
        await self._switch(interaction, action, on=True)

    @app_commands.command(description="Stop Parley taking this action here, even when asked (Manage Server).")
    @app_commands.describe(action="pin, unpin, thread, slowmode, delete or timeout")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def off(self, interaction: discord.Interaction, action: ServerAction) -> None:
        await self._switch(interaction, action, on=False)

    @app_commands.command(description="Which server actions Parley takes here, and what their askers need.")
    async def show(self, interaction: discord.Interaction) -> None:
        client, switches = _switches(interaction)
        guild_id, _ = place_of(interaction)
        await send_ephemeral(interaction, describe_switches(await switches.turned_off(guild_id), client.settings))
