"""`/parley why | status | memory … | privacy …`: the commands for every member of a server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import discord
from discord import app_commands

from commands.catchup import catchup_command
from commands.embeds import Field, paginate, reply_embed, send_embeds, server_colour
from commands.memory import MemoryCommands
from commands.model_picker import model_command
from commands.privacy import PrivacyCommands
from commands.tree import in_a_server, place_of
from config import Settings
from conversation import ChannelConversation, ConversationManager
from deciding.journal import KEPT_PER_CHANNEL, LoggedDecision
from discord_io import discord_time, message_link
from ops.redaction import mask_credentials
from profiles.channels import Profiles
from profiles.member_models import MemberModels
from prompting.context import approx_tokens
from tools import Toolbox
from upkeep.coverage import Coverage
from usage.budget import UsageLedger, UsageSummary, next_utc_midnight
from usage.footer import day_so_far


class ParleyOperated(Protocol):
    """The client, as /parley why and /parley status see it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def manager(self) -> ConversationManager: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def toolbox(self) -> Toolbox: ...
    @property
    def shard_count(self) -> int | None: ...
    @property
    def coverage(self) -> Coverage: ...
    @property
    def profiles(self) -> Profiles: ...
    @property
    def member_models(self) -> MemberModels: ...

    def mode_of(self, channel_id: int) -> str: ...
    async def recent_decisions(self, channel_id: int, count: int) -> list[LoggedDecision]: ...


def operated(interaction: discord.Interaction) -> ParleyOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(ParleyOperated, interaction.client)


WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = KEPT_PER_CHANNEL
STATUS_MAX_PARTICIPANTS = 20
STATUS_TITLE = "Parley in this channel"
WHY_TITLE = "Why Parley answered or stayed silent"


class ParleyCommands(
    app_commands.Group,
    name="parley",
    description="Why Parley answered or stayed silent here, its conversation, and what it remembers of you.",
    guild_only=True,
):
    """`/parley why`, `status` and `memory …`, about the channel they are used in, and `privacy …`, about the member
    themselves; every member sees them (each command checks what the member may read when it runs), the admins'
    are `/parley-admin`."""

    def __init__(self) -> None:
        super().__init__()
        self.add_command(MemoryCommands())
        self.add_command(catchup_command())
        self.add_command(model_command())
        self.add_command(PrivacyCommands())

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        return in_a_server(interaction)

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

    @app_commands.command(description="Parley's conversation in this channel: since when, with whom, how long.")
    async def status(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = place_of(interaction)
        client = operated(interaction)
        your_model = None
        if client.member_models.on:
            profile = client.profiles.for_channel(channel_id)
            your_model = await client.member_models.model_for(profile, guild_id, interaction.user.id)
        embed = status_embed(
            client.manager.get(channel_id),
            channel_id,
            client.mode_of(channel_id),
            client.usage.summary(guild_id, channel_id),
            client.settings.server_tokens_per_day,
            shard=shard_of(guild_id, client.shard_count),
            recheck=client.coverage.reconciliation.describe(guild_id),
            # A server's problem may quote its URL: whatever it says shows no credentials.
            servers=mask_credentials(client.toolbox.describe_servers()),
            colour=server_colour(interaction.guild),
            your_model=your_model,
            your_day=day_so_far(client.usage.member_today(guild_id, interaction.user.id)),
        )
        # Participants are listed as mentions so they render as names; none of them is pinged.
        await send_embeds(interaction, [embed])


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
    recheck: str | None = None,
    your_model: str | None = None,
    your_day: str | None = None,
) -> discord.Embed:
    """What `/parley status` shows: the channel's conversation and mode, how far the archive's recheck against
    Discord has got (`recheck`), the shard, the model that answers the member (`your_model`, where members choose),
    today's tokens (the member's own: `your_day`), the MCP servers."""
    if conversation is None:
        about = f"No conversation in <#{channel_id}> right now: an @mention of Parley or a reply to it starts one."
        head = reply_embed(STATUS_TITLE, colour, description="\n".join(filter(None, [about, recheck])))
    else:
        about = (
            f"A conversation in <#{channel_id}> since {discord_time(conversation.started_at)},"
            f" last message {discord_time(conversation.last_activity)}."
        )
        head = reply_embed(
            STATUS_TITLE,
            colour,
            description="\n".join(filter(None, [about, recheck])),
            footer="Conversation started",
            timestamp=conversation.started_at,
        )
    fields = [Field("Mode", mode, inline=True), Field("Shard", shard, inline=True)]
    if your_model is not None:
        fields.append(Field("Your model", f"`{your_model}` (/parley model)", inline=True))
    if conversation is not None:
        fields += conversation_fields(conversation)
    fields += usage_fields(today, budget)
    if your_day is not None:
        fields.append(Field("Your tokens today", your_day, inline=True))
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
