"""`/parley-admin mode | threads | forget | usage`, `profile …`, `context …`, `access …`, `knowledge …` and
`support …`: the commands that change how Parley behaves in a channel or a server or show a server's costs, shown by
default only to members with Manage Messages."""

from __future__ import annotations

from typing import Literal, Protocol, cast

import discord
from discord import app_commands

from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off
from commands.access import AccessCommands
from commands.actions import ActionsCommands
from commands.digest import DigestCommands
from commands.knowledge import KnowledgeCommands
from commands.memory import ContextCommands
from commands.moderation import ModerationCommands
from commands.profile import ProfileCommands, profile_place_of
from commands.schedule import ScheduleCommands
from commands.support import SupportCommands
from commands.tree import Refusal, in_a_server, place_of, send_ephemeral
from commands.usage_report import answer_usage
from config import ChannelMode
from profiles.channels import Profiles
from records import CHANNEL_MODES, CHATTY, MENTION_ONLY, NORMAL
from usage.costs import PERIOD_DAYS


class AdminOperated(Protocol):
    """The client, as the /parley-admin mode, threads and forget commands see it (bot.py's Parley)."""

    @property
    def archive(self) -> Archive: ...
    @property
    def profiles(self) -> Profiles: ...

    async def set_threads(self, channel_id: int, guild_id: int, on: bool) -> None: ...
    async def forget(self, channel_id: int, guild_id: int) -> bool: ...


def operated(interaction: discord.Interaction) -> AdminOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(AdminOperated, interaction.client)


UsagePeriod = Literal["day", "week", "month"]
FORGOTTEN = (
    "Conversation ended and its model history dropped: the next @mention starts afresh, with nothing said"
    " before now as context (the archive and its search tools keep the messages)."
)
NOTHING_TO_FORGET = (
    "There was no conversation in this channel; the next @mention still starts afresh, with nothing said before now."
)
ThreadSetting = Literal["on", "off"]
THREAD_SETTINGS: tuple[str, ...] = ("on", "off")
THREADS_EFFECTS = {
    "on": "an @mention of Parley opens a thread on that message, and Parley answers every message in it that is"
    " not addressed to someone else, until the thread is archived or locked",
    "off": "Parley answers in the channel itself",
}
MODE_EFFECTS = {
    MENTION_ONLY: "Parley answers only @mentions of it and replies to its messages",
    NORMAL: "Parley answers @mentions, replies, and follow-ups to what it has just said",
    CHATTY: "Parley takes follow-ups for twice as long after it speaks, and its judge (when on) weighs more messages",
}


class AdminCommands(
    app_commands.Group,
    name="parley-admin",
    description="Set how Parley behaves here, and see what it costs.",
    guild_only=True,
    # Discord shows the group only to members with Manage Messages by default; a server can change
    # that, and subcommands cannot have defaults of their own, so each command checks when it runs.
    # https://discord.com/developers/docs/interactions/application-commands#permissions
    default_permissions=discord.Permissions(manage_messages=True),
):
    """`/parley-admin mode`, `threads`, `forget`, `usage`, `context …`, `profile …`, `access …`, `digest …`,
    `knowledge …`, `support …`, `actions …` and `schedule …`, about the channel they are used in (`usage`, `access`,
    `knowledge`, `support report`, `actions` and `schedule`: its server)."""

    def __init__(self) -> None:
        super().__init__()
        self.add_command(ContextCommands())
        self.add_command(ProfileCommands())
        self.add_command(AccessCommands())
        self.add_command(DigestCommands())
        self.add_command(KnowledgeCommands())
        self.add_command(SupportCommands())
        self.add_command(ModerationCommands())
        self.add_command(ActionsCommands())
        self.add_command(ScheduleCommands())

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return in_a_server(interaction)

    @app_commands.command(description="How readily Parley joins in here: mention-only, normal or chatty.")
    @app_commands.describe(mode="mention-only: only @mentions and replies; normal: default; chatty: more follow-ups")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def mode(self, interaction: discord.Interaction, mode: ChannelMode) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if mode not in CHANNEL_MODES:
            raise Refusal(f"Unknown mode {mode!r}: choose {', '.join(CHANNEL_MODES[:-1])} or {CHANNEL_MODES[-1]}.")
        # A shortcut for `/parley-admin profile set mode`, at the channel's scope.
        guild_id, channel_id = profile_place_of(interaction)
        client = operated(interaction)
        try:
            await client.profiles.set_value("channel", guild_id, channel_id, "mode", mode, interaction.user.id)
        except ArchiveWriteFailed:
            raise Refusal("The mode could not be saved, so it is unchanged; the details are in Parley's log.") from None
        await send_ephemeral(interaction, describe_mode_change(channel_id, mode, kept=not archive_off(client.archive)))

    @app_commands.command(description="Whether an @mention of Parley here opens a thread for the conversation.")
    @app_commands.describe(setting="on: each @mention opens a thread on the message and Parley answers there; off: not")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def threads(self, interaction: discord.Interaction, setting: ThreadSetting) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if setting not in THREAD_SETTINGS:
            raise Refusal(f"Unknown setting {setting!r}: choose on or off.")
        if isinstance(interaction.channel, discord.Thread):
            raise Refusal("A thread cannot hold threads: use /parley-admin threads in the channel it belongs to.")
        guild_id, channel_id = place_of(interaction)
        client = operated(interaction)
        try:
            await client.set_threads(channel_id, guild_id, setting == "on")
        except ArchiveWriteFailed:
            raise Refusal(
                "The setting could not be saved, so it is unchanged; the details are in Parley's log."
            ) from None
        kept = not archive_off(client.archive)
        await send_ephemeral(interaction, describe_threads_change(channel_id, setting, kept=kept))

    @app_commands.command(description="End this channel's conversation with Parley and drop its model history.")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def forget(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = place_of(interaction)
        try:
            ended = await operated(interaction).forget(channel_id, guild_id)
        except ArchiveWriteFailed:
            raise Refusal(
                "Nothing was forgotten: the archive could not save it; the details are in Parley's log."
            ) from None
        await send_ephemeral(interaction, FORGOTTEN if ended else NOTHING_TO_FORGET)

    @app_commands.command(description="What Parley's model calls used and cost in this server, by channel and member.")
    @app_commands.describe(period="day: today (UTC); week: the last 7 days; month: the last 30 days")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def usage(self, interaction: discord.Interaction, period: UsagePeriod = "day") -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if period not in PERIOD_DAYS:
            raise Refusal(f"Unknown period {period!r}: choose day, week or month.")
        await answer_usage(interaction, period)


def describe_threads_change(channel_id: int, setting: str, *, kept: bool) -> str:
    """What `/parley-admin threads` says once it is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    effect = THREADS_EFFECTS[setting]
    return f"Threads are **{setting}** in <#{channel_id}> from the next message on: {effect}.{lasting}"


def describe_mode_change(channel_id: int, mode: str, *, kept: bool) -> str:
    """What `/parley-admin mode` says once the mode is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"<#{channel_id}> is **{mode}** from the next message on: {MODE_EFFECTS[mode]}.{lasting}"
