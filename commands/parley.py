"""`/parley why | mode | threads | forget | status | usage`, and the group that holds the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import discord
from discord import app_commands

from archive import ArchiveWriteFailed
from budget import UsageSummary, next_utc_midnight
from commands.memory import ContextCommands, MemoryCommands
from commands.profile import ProfileCommands, profile_place_of
from commands.tree import Refusal, message_link, operated, place_of, send_ephemeral
from config import ChannelMode
from context import approx_tokens
from conversation import ChannelConversation
from costs import PERIOD_DAYS, UsageReport, describe_usage_report
from discord_io import discord_time
from journal import KEPT_PER_CHANNEL, LoggedDecision
from ops.redaction import mask_credentials
from records import CHANNEL_MODES, CHATTY, MENTION_ONLY, NORMAL

UsagePeriod = Literal["day", "week", "month"]
WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = KEPT_PER_CHANNEL
# --- Operator commands: /parley why | mode | forget | status ---------------------------------------

STATUS_MAX_PARTICIPANTS = 20
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


class ParleyCommands(
    app_commands.Group,
    name="parley",
    description="See why Parley answered or stayed silent here, and set how chatty it is.",
    guild_only=True,
    # Discord shows the group only to members with Manage Messages by default; a server can change
    # that, and subcommands cannot have defaults of their own, so each command checks when it runs.
    default_permissions=discord.Permissions(manage_messages=True),
):
    """`/parley why`, `mode`, `threads`, `forget`, `status`, `usage`, `memory …`, `context …` and `profile …`, about
    the channel they are used in (`usage`: its server)."""

    def __init__(self) -> None:
        super().__init__()
        self.add_command(MemoryCommands())
        self.add_command(ContextCommands())
        self.add_command(ProfileCommands())

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        # guild_only keeps the group out of DMs in Discord's clients, but a request can still say otherwise.
        if interaction.guild_id is None or interaction.channel_id is None:
            raise app_commands.NoPrivateMessage()
        return True

    @app_commands.command(description="Why Parley answered or stayed silent: this channel's latest decisions.")
    @app_commands.describe(count=f"How many, newest first (default {WHY_DEFAULT_COUNT}, at most {WHY_MAX_COUNT})")
    async def why(
        self,
        interaction: discord.Interaction,
        count: app_commands.Range[int, 1, WHY_MAX_COUNT] = WHY_DEFAULT_COUNT,
    ) -> None:
        guild_id, channel_id = place_of(interaction)
        # The decisions quote the channel's messages: only for members who may read its history.
        if not interaction.permissions.read_message_history:
            raise app_commands.MissingPermissions(["read_message_history"])
        # Discord enforces the range, but a request can still say otherwise.
        count = min(max(count, 1), WHY_MAX_COUNT)
        entries = await operated(interaction).recent_decisions(channel_id, count)
        # An excerpt may hold a link; its preview would bury the list.
        await send_ephemeral(interaction, describe_decisions(entries, guild_id, channel_id), suppress_embeds=True)

    @app_commands.command(description="How readily Parley joins in here: mention-only, normal or chatty.")
    @app_commands.describe(mode="mention-only: only @mentions and replies; normal: default; chatty: more follow-ups")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def mode(self, interaction: discord.Interaction, mode: ChannelMode) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if mode not in CHANNEL_MODES:
            raise Refusal(f"Unknown mode {mode!r}: choose {', '.join(CHANNEL_MODES[:-1])} or {CHANNEL_MODES[-1]}.")
        # A shortcut for `/parley profile set mode`, at the channel's scope.
        guild_id, channel_id = profile_place_of(interaction)
        client = operated(interaction)
        try:
            await client.profiles.set_value("channel", guild_id, channel_id, "mode", mode, interaction.user.id)
        except ArchiveWriteFailed:
            raise Refusal("The mode could not be saved, so it is unchanged; the details are in Parley's log.") from None
        await send_ephemeral(interaction, describe_mode_change(channel_id, mode, kept=client.archive is not None))

    @app_commands.command(description="Whether an @mention of Parley here opens a thread for the conversation.")
    @app_commands.describe(setting="on: each @mention opens a thread on the message and Parley answers there; off: not")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def threads(self, interaction: discord.Interaction, setting: ThreadSetting) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if setting not in THREAD_SETTINGS:
            raise Refusal(f"Unknown setting {setting!r}: choose on or off.")
        if isinstance(interaction.channel, discord.Thread):
            raise Refusal("A thread cannot hold threads: use /parley threads in the channel it belongs to.")
        guild_id, channel_id = place_of(interaction)
        client = operated(interaction)
        try:
            await client.set_threads(channel_id, guild_id, setting == "on")
        except ArchiveWriteFailed:
            raise Refusal(
                "The setting could not be saved, so it is unchanged; the details are in Parley's log."
            ) from None
        await send_ephemeral(interaction, describe_threads_change(channel_id, setting, kept=client.archive is not None))

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

    @app_commands.command(description="Parley's conversation in this channel: since when, with whom, how long.")
    async def status(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = place_of(interaction)
        client = operated(interaction)
        text = "\n".join(
            [
                describe_status(client.manager.get(channel_id), client.mode_of(channel_id)),
                describe_shard(guild_id, client.shard_count),
                *filter(None, [client.coverage.reconciliation.describe(guild_id)]),
                describe_usage(client.usage.summary(guild_id, channel_id), client.settings.server_tokens_per_day),
                *filter(None, [client.toolbox.describe_servers()]),
            ]
        )
        # Whatever a part quotes shows no credentials: an MCP server's problem may quote its URL.
        text = mask_credentials(text)
        # Participants are listed as mentions so they render as names; none of them is pinged.
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())

    @app_commands.command(description="What Parley's model calls used and cost in this server, by channel and member.")
    @app_commands.describe(period="day: today (UTC); week: the last 7 days; month: the last 30 days")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def usage(self, interaction: discord.Interaction, period: UsagePeriod = "day") -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if period not in PERIOD_DAYS:
            raise Refusal(f"Unknown period {period!r}: choose day, week or month.")
        guild_id, _ = place_of(interaction)
        client = operated(interaction)
        rows = await client.usage.guild_usage(guild_id, PERIOD_DAYS[period])
        text = describe_usage_report(UsageReport.of(rows), period)
        if period != "day" and client.archive is None:
            text += "\nOnly today's figures: the archive, which keeps earlier days, is off."
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())


def describe_shard(guild_id: int, shard_count: int | None) -> str:
    """Which shard serves the server, for finding the process (and its log) that answers there."""
    count = shard_count or 1
    # Discord's routing: https://discord.com/developers/docs/topics/gateway#sharding
    return f"Shard: {(guild_id >> 22) % count} of {count}"


def describe_threads_change(channel_id: int, setting: str, *, kept: bool) -> str:
    """What `/parley threads` says once it is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    effect = THREADS_EFFECTS[setting]
    return f"Threads are **{setting}** in <#{channel_id}> from the next message on: {effect}.{lasting}"


def describe_decisions(entries: Sequence[LoggedDecision], guild_id: int, channel_id: int) -> str:
    """What `/parley why` says: a header, then one line per decision, newest first."""
    if not entries:
        return "No decisions recorded in this channel yet."
    header = f"Last {len(entries)} decision{'' if len(entries) == 1 else 's'} in <#{channel_id}>, newest first:"
    return "\n".join([header, *(describe_decision(entry, guild_id, channel_id) for entry in entries)])


def describe_decision(entry: LoggedDecision, guild_id: int, channel_id: int) -> str:
    """One `/parley why` line: verdict, reason (tier, judge's confidence), author, time, excerpt, link."""
    verdict = "answered" if entry.respond else "silent"
    # The learned tier's confidence is its model's score, which operators compare with the mode's threshold.
    measure = "score" if entry.tier == "learned" else "confidence"
    tier = entry.tier if entry.confidence is None else f"{entry.tier}, {measure} {entry.confidence:.2f}"
    author = discord.utils.escape_markdown(entry.author)
    sent = discord_time(discord.utils.snowflake_time(entry.message_id))
    text = discord.utils.escape_markdown(entry.excerpt) if entry.excerpt else "(no text)"
    link = message_link(guild_id, channel_id, entry.message_id)
    return f"**{verdict}** `{entry.reason}` ({tier}) · **{author}** {sent}: “{text}” [jump]({link})"


def describe_status(conversation: ChannelConversation | None, mode: str) -> str:
    """What `/parley status` says about a channel's conversation and mode."""
    if conversation is None:
        return f"No conversation here right now: an @mention of Parley or a reply to it starts one.\nMode: **{mode}**"
    people = sorted(conversation.participants)
    shown = ", ".join(f"<@{user_id}>" for user_id in people[:STATUS_MAX_PARTICIPANTS])
    if len(people) > STATUS_MAX_PARTICIPANTS:
        shown += f" and {len(people) - STATUS_MAX_PARTICIPANTS} more"
    history = conversation.llm_history
    return "\n".join(
        [
            f"Conversation active since {discord_time(conversation.started_at)},"
            f" last message {discord_time(conversation.last_activity)}",
            f"Participants: {shown or 'none yet'}",
            f"Bot turns: {conversation.bot_turns}; model history: about {approx_tokens(history):,} tokens"
            f" in {len(history)} messages",
            f"Mode: **{mode}**",
        ]
    )


def describe_usage(summary: UsageSummary, budget: int) -> str:
    """What `/parley status` says about today's tokens: the server's (against its budget), the channel's, top people."""
    reset = discord_time(next_utc_midnight(summary.day))
    limit = f" of {budget:,} (resets {reset})" if budget else " (no daily budget)"
    lines = [
        f"Tokens today (UTC): this server {summary.server_tokens:,}{limit}; this channel {summary.channel_tokens:,}"
    ]
    if summary.top_members:
        people = ", ".join(f"<@{member}> {tokens:,}" for member, tokens in summary.top_members)
        lines.append(f"Top members today: {people}")
    return "\n".join(lines)


def describe_mode_change(channel_id: int, mode: str, *, kept: bool) -> str:
    """What `/parley mode` says once the mode is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"<#{channel_id}> is **{mode}** from the next message on: {MODE_EFFECTS[mode]}.{lasting}"
