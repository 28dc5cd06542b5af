"""`/parley why | mode | threads | forget | status | usage`, and the group that holds the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import discord
from discord import app_commands

from archive import ArchiveWriteFailed
from budget import UsageSummary, next_utc_midnight
from commands.embeds import Field, paginate, reply_embed, send_embeds, server_colour
from commands.memory import ContextCommands, MemoryCommands
from commands.profile import ProfileCommands, profile_place_of
from commands.tree import Refusal, message_link, operated, place_of, send_ephemeral
from commands.usage_report import answer_usage
from config import ChannelMode
from context import approx_tokens
from conversation import ChannelConversation
from costs import PERIOD_DAYS
from discord_io import discord_time
from journal import KEPT_PER_CHANNEL, LoggedDecision
from ops.redaction import mask_credentials
from records import CHANNEL_MODES, CHATTY, MENTION_ONLY, NORMAL

UsagePeriod = Literal["day", "week", "month"]
WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = KEPT_PER_CHANNEL
# --- Operator commands: /parley why | mode | forget | status ---------------------------------------

STATUS_MAX_PARTICIPANTS = 20
STATUS_TITLE = "Parley in this channel"
WHY_TITLE = "Why Parley answered or stayed silent"
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
        await send_embeds(interaction, why_embeds(entries, guild_id, channel_id, server_colour(interaction.guild)))

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
        embed = status_embed(
            client.manager.get(channel_id),
            channel_id,
            client.mode_of(channel_id),
            client.usage.summary(guild_id, channel_id),
            client.settings.server_tokens_per_day,
            shard=shard_of(guild_id, client.shard_count),
            # A server's problem may quote its URL: whatever it says shows no credentials.
            servers=mask_credentials(client.toolbox.describe_servers()),
            colour=server_colour(interaction.guild),
        )
        # Participants are listed as mentions so they render as names; none of them is pinged.
        await send_embeds(interaction, [embed])

    @app_commands.command(description="What Parley's model calls used and cost in this server, by channel and member.")
    @app_commands.describe(period="day: today (UTC); week: the last 7 days; month: the last 30 days")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def usage(self, interaction: discord.Interaction, period: UsagePeriod = "day") -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if period not in PERIOD_DAYS:
            raise Refusal(f"Unknown period {period!r}: choose day, week or month.")
        await answer_usage(interaction, period)


def describe_threads_change(channel_id: int, setting: str, *, kept: bool) -> str:
    """What `/parley threads` says once it is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    effect = THREADS_EFFECTS[setting]
    return f"Threads are **{setting}** in <#{channel_id}> from the next message on: {effect}.{lasting}"


def shard_of(guild_id: int, shard_count: int | None) -> str:
    """Which shard serves the server, for finding the process (and its log) that answers there."""
    count = shard_count or 1
    # Discord's routing: https://discord.com/developers/docs/topics/gateway#sharding
    return f"{(guild_id >> 22) % count} of {count}"


def why_embeds(
    entries: Sequence[LoggedDecision], guild_id: int, channel_id: int, colour: discord.Colour
) -> list[discord.Embed]:
    """What `/parley why` shows: a field per decision, newest first, timed by the newest."""
    if not entries:
        return [reply_embed(WHY_TITLE, colour, description=f"No decisions recorded in <#{channel_id}> yet.")]
    count = len(entries)
    head = reply_embed(
        WHY_TITLE,
        colour,
        description=f"Last {count} decision{'' if count == 1 else 's'} in <#{channel_id}>, newest first.",
        footer="Newest decision",
        timestamp=discord.utils.snowflake_time(entries[0].message_id),
    )
    return paginate(head, [decision_field(entry, guild_id, channel_id) for entry in entries])


def decision_field(entry: LoggedDecision, guild_id: int, channel_id: int) -> Field:
    """One `/parley why` field: verdict, reason (tier, judge's confidence); then author, time, excerpt, link."""
    verdict = "answered" if entry.respond else "silent"
    # The learned tier's confidence is its model's score, which operators compare with the mode's threshold.
    measure = "score" if entry.tier == "learned" else "confidence"
    tier = entry.tier if entry.confidence is None else f"{entry.tier}, {measure} {entry.confidence:.2f}"
    author = discord.utils.escape_markdown(entry.author)
    sent = discord_time(discord.utils.snowflake_time(entry.message_id))
    text = discord.utils.escape_markdown(entry.excerpt) if entry.excerpt else "(no text)"
    link = message_link(guild_id, channel_id, entry.message_id)
    return Field(f"{verdict} · {entry.reason} ({tier})", f"**{author}** {sent}: “{text}” [jump]({link})")


def status_embed(
    conversation: ChannelConversation | None,
    channel_id: int,
    mode: str,
    today: UsageSummary,
    budget: int,
    *,
    shard: str,
    servers: str,
    colour: discord.Colour,
) -> discord.Embed:
    """What `/parley status` shows: the channel's conversation and mode, the shard, today's tokens, MCP servers."""
    if conversation is None:
        head = reply_embed(
            STATUS_TITLE,
            colour,
            description=f"No conversation in <#{channel_id}> right now: an @mention of Parley or a reply to it"
            " starts one.",
        )
    else:
        head = reply_embed(
            STATUS_TITLE,
            colour,
            description=f"A conversation in <#{channel_id}> since {discord_time(conversation.started_at)},"
            f" last message {discord_time(conversation.last_activity)}.",
            footer="Conversation started",
            timestamp=conversation.started_at,
        )
    fields = [Field("Mode", mode, inline=True), Field("Shard", shard, inline=True)]
    if conversation is not None:
        fields += conversation_fields(conversation)
    fields += usage_fields(today, budget)
    if servers:
        fields.append(Field("MCP servers", servers))
    [embed] = paginate(head, fields, max_embeds=1)
    return embed


def conversation_fields(conversation: ChannelConversation) -> list[Field]:
    """Status's fields about a conversation: its turns, its model history, and who took part (as mentions)."""
    people = sorted(conversation.participants)
    shown = ", ".join(f"<@{user_id}>" for user_id in people[:STATUS_MAX_PARTICIPANTS])
    if len(people) > STATUS_MAX_PARTICIPANTS:
        shown += f" and {len(people) - STATUS_MAX_PARTICIPANTS} more"
    history = conversation.llm_history
    return [
        Field("Bot turns", f"{conversation.bot_turns:,}", inline=True),
        Field("Model history", f"about {approx_tokens(history):,} tokens in {len(history)} messages", inline=True),
        Field("Participants", shown or "none yet"),
    ]


def usage_fields(summary: UsageSummary, budget: int) -> list[Field]:
    """Status's fields about today's tokens: the server's (against its budget), the channel's, the top members."""
    reset = discord_time(next_utc_midnight(summary.day))
    limit = f" of {budget:,} (resets {reset})" if budget else " (no daily budget)"
    fields = [
        Field(
            "Tokens today (UTC)",
            f"This server: {summary.server_tokens:,}{limit}\nThis channel: {summary.channel_tokens:,}",
        )
    ]
    if summary.top_members:
        people = ", ".join(f"<@{member}> {tokens:,}" for member, tokens in summary.top_members)
        fields.append(Field("Top members today", people))
    return fields


def describe_mode_change(channel_id: int, mode: str, *, kept: bool) -> str:
    """What `/parley mode` says once the mode is set; `kept`: whether it outlives a restart."""
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"<#{channel_id}> is **{mode}** from the next message on: {MODE_EFFECTS[mode]}.{lasting}"
