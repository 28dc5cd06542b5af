"""`/parley-admin schedule add | list | remove | run`: prompts Parley answers in a channel at set times.

A scheduled prompt is a reminder whose text is asked of the model (reminders/book.py keeps it, reminders/scheduler.py
claims each time once across processes, answering/scheduled.py runs the model with the channel's profile and the
tools that change nothing). Manage Server may schedule in any channel; Manage Channels in the channel the command is
used in, for that channel. The owner's permission is checked again at each time (edge/reminder_posts.py).
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import discord
from discord import app_commands

from commands.tree import Refusal, place_of, send_ephemeral
from config import Settings
from discord_io import may_post
from reminders.book import PROMPT_MAX_CHARS, ReminderRefused
from reminders.scheduler import PostRefused, ReminderScheduler
from reminders.when import describe, describe_every

NOT_ALLOWED = "You need Manage Server, or Manage Channels in the channel it is for (used there), to {what}."
NONE_SCHEDULED = "This server has no scheduled prompts; `/parley-admin schedule add` sets one."


class Scheduling(Protocol):
    """The client, as `/parley-admin schedule` sees it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def reminders(self) -> ReminderScheduler: ...


def _scheduling(interaction: discord.Interaction) -> Scheduling:
    client: Any = interaction.client
    return cast(Scheduling, client)


def may_schedule(interaction: discord.Interaction, channel_id: int) -> bool:
    """Manage Server anywhere in the server; Manage Channels for the channel the command is used in."""
    allowed = interaction.permissions
    return allowed.manage_guild or (allowed.manage_channels and channel_id == interaction.channel_id)


def _check(interaction: discord.Interaction, channel_id: int, what: str) -> None:
    if not may_schedule(interaction, channel_id):
        raise Refusal(NOT_ALLOWED.format(what=what))


class ScheduleCommands(
    app_commands.Group, name="schedule", description="Prompts Parley answers in a channel at set times."
):
    """`/parley-admin schedule add | list | remove | run`."""

    @app_commands.command(description="Have Parley answer a prompt in a channel at set times.")
    @app_commands.describe(
        prompt="What Parley is asked each time (it may search the channel, the documents and the web where on)",
        when="every monday 9:00, daily 18:00, weekdays 8:30, weekly friday 17:00 or every 6h (in Parley's TIMEZONE)",
        channel="Where the answer is posted (default: this channel; another channel takes Manage Server)",
    )
    async def add(
        self,
        interaction: discord.Interaction,
        prompt: app_commands.Range[str, 1, PROMPT_MAX_CHARS],
        when: app_commands.Range[str, 1, 100],
        channel: discord.TextChannel | None = None,
    ) -> None:
        guild_id, here = place_of(interaction)
        channel_id = here if channel is None else channel.id
        _check(interaction, channel_id, "schedule a prompt there")
        if channel is None and not may_post(
            interaction.permissions, in_thread=isinstance(interaction.channel, discord.Thread)
        ):
            raise Refusal("You can't post in this channel, so Parley won't post a scheduled answer here for you.")
        if channel is not None:
            allowed = channel.permissions_for(channel.guild.me)
            if not (allowed.view_channel and allowed.send_messages):
                raise Refusal(f"Parley may not post in <#{channel.id}>: grant it View Channel and Send Messages there.")
        client = _scheduling(interaction)
        book = client.reminders.book
        try:
            schedule = await book.schedule(
                guild_id=guild_id,
                channel_id=channel_id,
                owner_id=interaction.user.id,
                prompt=prompt,
                when=when,
                per_server=client.settings.schedules_per_server,
            )
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        every = describe_every(schedule.every)
        await send_ephemeral(
            interaction,
            f"Scheduled prompt {schedule.id}: Parley answers it in <#{channel_id}> {every}, first on"
            f" {describe(schedule.due_at, book.zone)}, pinging no one (`/parley-admin schedule run id:{schedule.id}`"
            " tries it now).",
        )

    @app_commands.command(name="list", description="The server's scheduled prompts and when each runs next.")
    async def list_schedules(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = place_of(interaction)
        _check(interaction, channel_id, "see the scheduled prompts")
        book = _scheduling(interaction).reminders.book
        try:
            schedules = await book.scheduled(guild_id)
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        # Manage Channels alone sees this channel's: the others' prompts are their channels' business.
        if not interaction.permissions.manage_guild:
            schedules = [schedule for schedule in schedules if schedule.channel_id == channel_id]
        if not schedules:
            await send_ephemeral(interaction, NONE_SCHEDULED)
            return
        await send_ephemeral(interaction, "\n".join(book.describe(schedule) for schedule in schedules))

    @app_commands.command(description="Remove a scheduled prompt (its id is in /parley-admin schedule list).")
    @app_commands.describe(id="The scheduled prompt's id")
    async def remove(self, interaction: discord.Interaction, id: int) -> None:
        guild_id, _ = place_of(interaction)
        book = _scheduling(interaction).reminders.book
        try:
            schedule = await book.scheduled_prompt(id, guild_id)
            _check(interaction, schedule.channel_id, "remove it")
            await book.unschedule(schedule)
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        await send_ephemeral(interaction, f"Scheduled prompt {id} removed: Parley no longer answers it.")

    @app_commands.command(description="Answer a scheduled prompt now, in its channel; its times stay as they are.")
    @app_commands.describe(id="The scheduled prompt's id")
    async def run(self, interaction: discord.Interaction, id: int) -> None:
        guild_id, _ = place_of(interaction)
        scheduler = _scheduling(interaction).reminders
        try:
            schedule = await scheduler.book.scheduled_prompt(id, guild_id)
        except ReminderRefused as refused:
            raise Refusal(str(refused)) from None
        _check(interaction, schedule.channel_id, "run it")
        # The model takes seconds; Discord waits 3 for a first response.
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            posted = await scheduler.run_now(schedule)
        except PostRefused as refused:
            raise Refusal(f"Discord refused the post in <#{schedule.channel_id}>: {refused}") from None
        if not posted:
            raise Refusal(
                "No answer was posted: the server's token budget is spent, or the model failed (see the log)."
            )
        await send_ephemeral(interaction, f"Scheduled prompt {id} answered in <#{schedule.channel_id}>.")
