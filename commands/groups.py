"""Every slash command group (and message command) Parley registers: one place to add one, so the client's wiring
stays one line."""

from __future__ import annotations

from discord import app_commands

from commands.admin import AdminCommands
from commands.ask import ask_command
from commands.ask_menu import ask_menu_command
from commands.parley import ParleyCommands
from commands.remind import RemindCommands
from commands.report_menu import report_menu_command


def add_slash_commands(tree: app_commands.CommandTree) -> None:
    """Add the members' groups `/parley` and `/remind`, the admins' `/parley-admin`, the top-level `/ask` and the
    "Ask Parley" and "Report to moderators" message commands to the client's tree.

    Discord's `default_member_permissions` applies per top-level command, not per subcommand
    (https://discord.com/developers/docs/interactions/application-commands#permissions), so who sees a command is
    decided by the group it is in.
    """
    tree.add_command(ParleyCommands())
    tree.add_command(AdminCommands())
    tree.add_command(RemindCommands())
    tree.add_command(ask_command())
    tree.add_command(ask_menu_command())
    tree.add_command(report_menu_command())
