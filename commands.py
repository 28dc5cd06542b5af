"""The /parley slash commands (an `app_commands.Group`, as in discord.py's examples) and the replies they give."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from agent import approx_tokens
from budget import UsageSummary, next_utc_midnight
from config import ChannelMode
from conversation import CHANNEL_MODES, CHATTY, MENTION_ONLY, NORMAL, ChannelConversation
from discord_io import split_message
from history import ArchiveWriteFailed

if TYPE_CHECKING:
    from bot import LoggedDecision, Parley

log = logging.getLogger("parley")

WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = 25

# --- Operator commands: /parley why | mode | forget | status ---------------------------------------

STATUS_MAX_PARTICIPANTS = 20
# A command reply's posts: `/parley why` at its largest (25 decisions, long names) needs about five.
EPHEMERAL_MAX_POSTS = 8
FORGOTTEN = (
    "Conversation ended and its model history dropped: the next @mention starts afresh, with nothing said"
    " before now as context (the archive and its search tools keep the messages)."
)
NOTHING_TO_FORGET = (
    "There was no conversation in this channel; the next @mention still starts afresh, with nothing said before now."
)
MODE_EFFECTS = {
    MENTION_ONLY: "Parley answers only @mentions of it and replies to its messages",
    NORMAL: "Parley answers @mentions, replies, and follow-ups to what it has just said",
    CHATTY: "Parley takes follow-ups for twice as long after it speaks, and its judge (when on) weighs more messages",
}


class Refusal(app_commands.AppCommandError):
    """A command turned down; its message is the one-line reply."""


class ParleyTree(app_commands.CommandTree):
    """The client's slash commands: one that cannot run says why in one line only its user sees."""

    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        if isinstance(error, app_commands.CommandInvokeError):
            log.error("/%s failed", _command_name(interaction), exc_info=error.original)
        try:
            await send_ephemeral(interaction, refusal(error, _command_name(interaction)))
        except discord.HTTPException as failure:
            log.warning("could not explain a failed command: %s", failure)


def refusal(error: app_commands.AppCommandError, command: str) -> str:
    """The one line that tells the user why `/command` did not run."""
    if isinstance(error, Refusal):
        return str(error)
    if isinstance(error, app_commands.NoPrivateMessage):
        return "Parley's commands work only in a server channel, not in direct messages."
    if isinstance(error, app_commands.MissingPermissions):
        needed = " and ".join(name.replace("_", " ").title() for name in error.missing_permissions)
        return f"You need the {needed} permission in this channel to use /{command}."
    if isinstance(error, app_commands.CommandNotFound | app_commands.CommandSignatureMismatch):
        return "This command is out of date; an operator can update Parley's commands with `python bot.py --sync`."
    return "Sorry, that command failed; the details are in Parley's log."


def _command_name(interaction: discord.Interaction) -> str:
    command = interaction.command
    return command.qualified_name if command is not None else "parley"


async def send_ephemeral(interaction: discord.Interaction, text: str, **options: Any) -> None:
    """Answer an interaction with `text` that only its user sees, in as many posts as Discord's limit needs
    (at most EPHEMERAL_MAX_POSTS)."""
    for part in split_message(text, max_posts=EPHEMERAL_MAX_POSTS):
        if interaction.response.is_done():
            await interaction.followup.send(part, ephemeral=True, **options)
        else:
            await interaction.response.send_message(part, ephemeral=True, **options)


def _place(interaction: discord.Interaction) -> tuple[int, int]:
    """The guild and channel a command was used in (`interaction_check` has refused any other)."""
    assert interaction.guild_id is not None and interaction.channel_id is not None
    return interaction.guild_id, interaction.channel_id


class ParleyCommands(
    app_commands.Group,
    name="parley",
    description="See why Parley answered or stayed silent here, and set how chatty it is.",
    guild_only=True,
    # Discord shows the group only to members with Manage Messages by default; a server can change
    # that, and subcommands cannot have defaults of their own, so each command checks when it runs.
    default_permissions=discord.Permissions(manage_messages=True),
):
    """`/parley why`, `mode`, `forget` and `status`, about the channel they are used in."""

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        # guild_only keeps the group out of DMs in Discord's clients, but a request can still say otherwise.
        if interaction.guild_id is None or interaction.channel_id is None:
            raise app_commands.NoPrivateMessage()
        return True

    @app_commands.command(description="Why Parley answered or stayed silent: this channel's latest decisions.")
    @app_commands.describe(count=f"How many, newest first (default {WHY_DEFAULT_COUNT}, at most {WHY_MAX_COUNT})")
    async def why(
        self,
        interaction: discord.Interaction[Parley],
        count: app_commands.Range[int, 1, WHY_MAX_COUNT] = WHY_DEFAULT_COUNT,
    ) -> None:
        guild_id, channel_id = _place(interaction)
        # Discord enforces the range, but a request can still say otherwise.
        count = min(max(count, 1), WHY_MAX_COUNT)
        entries = await interaction.client.recent_decisions(channel_id, count)
        # An excerpt may hold a link; its preview would bury the list.
        await send_ephemeral(interaction, describe_decisions(entries, guild_id, channel_id), suppress_embeds=True)

    @app_commands.command(description="How readily Parley joins in here: mention-only, normal or chatty.")
    @app_commands.describe(mode="mention-only: only @mentions and replies; normal: default; chatty: more follow-ups")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def mode(self, interaction: discord.Interaction[Parley], mode: ChannelMode) -> None:
        # Discord offers only the choices, but a request can still say otherwise.
        if mode not in CHANNEL_MODES:
            raise Refusal(f"Unknown mode {mode!r}: choose {', '.join(CHANNEL_MODES[:-1])} or {CHANNEL_MODES[-1]}.")
        guild_id, channel_id = _place(interaction)
        client = interaction.client
        try:
            await client.set_mode(channel_id, guild_id, mode)
        except ArchiveWriteFailed:
            raise Refusal("The mode could not be saved, so it is unchanged; the details are in Parley's log.") from None
        await send_ephemeral(interaction, describe_mode_change(channel_id, mode, kept=client.archive is not None))

    @app_commands.command(description="End this channel's conversation with Parley and drop its model history.")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def forget(self, interaction: discord.Interaction[Parley]) -> None:
        guild_id, channel_id = _place(interaction)
        try:
            ended = await interaction.client.forget(channel_id, guild_id)
        except ArchiveWriteFailed:
            raise Refusal(
                "Nothing was forgotten: the archive could not save it; the details are in Parley's log."
            ) from None
        await send_ephemeral(interaction, FORGOTTEN if ended else NOTHING_TO_FORGET)

    @app_commands.command(description="Parley's conversation in this channel: since when, with whom, how long.")
    async def status(self, interaction: discord.Interaction[Parley]) -> None:
        guild_id, channel_id = _place(interaction)
        client = interaction.client
        text = "\n".join(
            [
                describe_status(client.manager.get(channel_id), client.mode_of(channel_id)),
                describe_usage(client.usage.summary(guild_id, channel_id), client.settings.server_tokens_per_day),
            ]
        )
        # Participants are listed as mentions so they render as names; none of them is pinged.
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())


def describe_decisions(entries: Sequence[LoggedDecision], guild_id: int, channel_id: int) -> str:
    """What `/parley why` says: a header, then one line per decision, newest first."""
    if not entries:
        return "No decisions recorded in this channel yet."
    header = f"Last {len(entries)} decision{'' if len(entries) == 1 else 's'} in <#{channel_id}>, newest first:"
    return "\n".join([header, *(describe_decision(entry, guild_id, channel_id) for entry in entries)])


def describe_decision(entry: LoggedDecision, guild_id: int, channel_id: int) -> str:
    """One `/parley why` line: verdict, reason (tier, judge's confidence), author, time, excerpt, link."""
    verdict = "answered" if entry.respond else "silent"
    tier = entry.tier if entry.confidence is None else f"{entry.tier}, confidence {entry.confidence:.2f}"
    author = discord.utils.escape_markdown(entry.author)
    sent = discord_time(discord.utils.snowflake_time(entry.message_id))
    text = discord.utils.escape_markdown(entry.excerpt) if entry.excerpt else "(no text)"
    link = message_link(guild_id, channel_id, entry.message_id)
    return f"**{verdict}** `{entry.reason}` ({tier}) · **{author}** {sent}: “{text}” [jump]({link})"


def message_link(guild_id: int, channel_id: int, message_id: int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


def discord_time(moment: datetime) -> str:
    """A timestamp each reader's Discord client shows as relative time ("2 minutes ago")."""
    return f"<t:{int(moment.timestamp())}:R>"


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
