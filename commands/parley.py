"""`/parley why | status | memory … | privacy …`: the commands for every member of a server."""

from __future__ import annotations

from collections.abc import Sequence

import discord
from discord import app_commands

from budget import UsageSummary, next_utc_midnight
from commands.catchup import catchup_command
from commands.memory import MemoryCommands
from commands.privacy import PrivacyCommands
from commands.tree import in_a_server, message_link, operated, place_of, send_ephemeral
from context import approx_tokens
from conversation import ChannelConversation
from discord_io import discord_time
from journal import KEPT_PER_CHANNEL, LoggedDecision
from ops.redaction import mask_credentials

WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = KEPT_PER_CHANNEL
STATUS_MAX_PARTICIPANTS = 20


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
        # An excerpt may hold a link; its preview would bury the list.
        await send_ephemeral(interaction, describe_decisions(entries, guild_id, channel_id), suppress_embeds=True)

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


def describe_shard(guild_id: int, shard_count: int | None) -> str:
    """Which shard serves the server, for finding the process (and its log) that answers there."""
    count = shard_count or 1
    # Discord's routing: https://discord.com/developers/docs/topics/gateway#sharding
    return f"Shard: {(guild_id >> 22) % count} of {count}"


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
