"""`/remind set | list | cancel`: a member's reminders and timed posts in a server (reminders/book.py's rules).

Every reply is one ephemeral line (a list, a few). A timed post to the channel (`here`) needs Manage Messages
there; a reminder's owner may cancel it, and so may a member with Manage Messages in the channel it posts to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import discord
from discord import app_commands

from admission.access import AccessVerdict, Asker, Place
from commands.tree import Refusal, in_a_server, place_of, send_ephemeral
from discord_io import may_post
from edge.arrival import access_place
from reminders.book import TEXT_MAX_CHARS, ReminderBook, ReminderRefused
from reminders.scheduler import ReminderScheduler
from reminders.when import EVERY_MAX_CHARS

NONE_WAITING = "You have no reminders waiting in this server; `/remind set` sets one."


class RemindAccess(Protocol):
    """Who may use Parley where, as a command asks it (admission/access_gate.py)."""

    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker: ...

    def server_verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict: ...


class Reminding(Protocol):
    """The client, as `/remind` sees it (bot.py's Parley)."""

    @property
    def reminders(self) -> ReminderScheduler: ...
    @property
    def access(self) -> RemindAccess: ...


def reminder_book(interaction: discord.Interaction) -> ReminderBook:
    client: Any = interaction.client
    return cast(Reminding, client).reminders.book


class RemindCommands(
    app_commands.Group,
    name="remind",
    description="Reminders for you, and timed posts to a channel, at a time or again and again.",
    guild_only=True,
):
    """`/remind set`, `list` and `cancel`, for every member (a timed post to the channel needs Manage Messages)."""

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return in_a_server(interaction)

    @app_commands.command(name="set", description="Remind you here at a time (or post to this channel), once or again.")
    @app_commands.describe(
        when="2h, 90m, in 2 hours, tomorrow 9:00, monday 9:00, 17:30 or 2026-12-01 14:00",
        what="What to remind you of (or to post)",
        every="Repeat it: hourly, 6h, daily, weekdays or weekly; empty: once",
        here="Post it to this channel for everyone, pinging no one (needs Manage Messages); default: remind only you",
    )
    async def set_reminder(
        self,
        interaction: discord.Interaction,
        when: str,
        what: app_commands.Range[str, 1, TEXT_MAX_CHARS],
        every: app_commands.Range[str, 1, EVERY_MAX_CHARS] | None = None,
        here: bool = False,
    ) -> None:
        guild_id, channel_id = place_of(interaction)
        if here and not interaction.permissions.manage_messages:
            raise app_commands.MissingPermissions(["manage_messages"])
        client = cast(Reminding, interaction.client)
        if interaction.channel is not None:
            asker = await client.access.asker(guild_id, interaction.user)
            found = client.access.server_verdict(guild_id, access_place(interaction.channel), asker)
            if not found.allowed:
                raise Refusal(found.refusal)
        book = client.reminders.book
        in_thread = isinstance(interaction.channel, discord.Thread)
        try:
            reminder = await book.set(
                guild_id=guild_id,
                channel_id=channel_id,
                owner_id=interaction.user.id,
                owner_may_post=may_post(interaction.permissions, in_thread=in_thread),
                text=what,
                when=when,
                every=every or "",
                post_here=here,
            )
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        await send_ephemeral(interaction, book.confirmation(reminder))

    @app_commands.command(name="list", description="Your reminders waiting in this server, with their ids.")
    async def list_reminders(self, interaction: discord.Interaction) -> None:
        guild_id, _ = place_of(interaction)
        book = reminder_book(interaction)
        try:
            found = await book.mine(guild_id, interaction.user.id)
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        text = "\n".join(book.describe(reminder) for reminder in found) if found else NONE_WAITING
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())

    @app_commands.command(description="Cancel a reminder: yours, or any in a channel where you have Manage Messages.")
    @app_commands.describe(id="The reminder's id, as /remind list shows it")
    async def cancel(self, interaction: discord.Interaction, id: int) -> None:
        guild_id, _ = place_of(interaction)
        try:
            reminder = await reminder_book(interaction).cancel(
                id, guild_id=guild_id, member_id=interaction.user.id, manages=_manages_in(interaction)
            )
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        whose = "" if reminder.owner_id == interaction.user.id else f" (<@{reminder.owner_id}>'s)"
        await send_ephemeral(
            interaction, f"Cancelled reminder {reminder.id}{whose}.", allowed_mentions=discord.AllowedMentions.none()
        )


def _manages_in(interaction: discord.Interaction) -> Callable[[int], bool]:
    """Whether the member has Manage Messages in a channel of the server, by the channel's id."""

    def manages(channel_id: int) -> bool:
        if channel_id == interaction.channel_id:
            return interaction.permissions.manage_messages  # as Discord computed them for this interaction
        guild, member = interaction.guild, interaction.user
        channel = None if guild is None else guild.get_channel_or_thread(channel_id)
        if channel is None or not isinstance(member, discord.Member):
            return False
        return channel.permissions_for(member).manage_messages

    return manages
