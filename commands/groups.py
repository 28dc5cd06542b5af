"""Every slash command group Parley registers: one place to add a group, so the client's wiring stays one line."""

from __future__ import annotations

from discord import app_commands

from commands.admin import AdminCommands
from commands.parley import ParleyCommands
from commands.remind import RemindCommands


def add_slash_commands(tree: app_commands.CommandTree) -> None:
    """Add the members' groups `/parley` and `/remind` and the admins' `/parley-admin` to the client's tree.

    Discord's `default_member_permissions` applies per top-level command, not per subcommand
    (https://discord.com/developers/docs/interactions/application-commands#permissions), so who sees a command is
    decided by the group it is in.
    """
    tree.add_command(ParleyCommands())
    tree.add_command(AdminCommands())
    tree.add_command(RemindCommands())
