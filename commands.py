"""The /parley slash commands (an `app_commands.Group`, as in discord.py's examples) and the replies they give."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, cast

import discord
from discord import app_commands
from pydantic_ai.messages import ModelMessage

from archive import Archive, ArchiveWriteFailed
from budget import UsageLedger, UsageSummary, next_utc_midnight
from config import ChannelMode, Settings
from context import approx_tokens
from conversation import ChannelConversation, ConversationManager
from costs import PERIOD_DAYS, UsageReport, describe_usage_report
from discord_io import discord_time, split_message
from journal import KEPT_PER_CHANNEL, LoggedDecision
from memory import SNAPSHOT_NAME_MAX_CHARS, Memory, MemoryStore, Snapshot
from ops.redaction import mask_credentials
from profiles import ALL_TOOLS, ARCHIVE, FIELDS, MEMORY, NO_TOOLS, ProfileField, Profiles, Scope, Source, Value
from records import CHANNEL_MODES, CHATTY, MENTION_ONLY, NORMAL
from tools import Toolbox

log = logging.getLogger("parley")


class Operated(Protocol):
    """The client, as the /parley commands see it (bot.py's Parley): what they read, and the changes they make."""

    @property
    def settings(self) -> Settings: ...
    @property
    def manager(self) -> ConversationManager: ...
    @property
    def profiles(self) -> Profiles: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def toolbox(self) -> Toolbox: ...
    @property
    def archive(self) -> Archive | None: ...
    @property
    def memory(self) -> MemoryStore | None: ...
    @property
    def shard_count(self) -> int | None: ...

    def mode_of(self, channel_id: int) -> str: ...
    def profile_place(self, channel_id: int) -> tuple[int | None, int]: ...
    async def recent_decisions(self, channel_id: int, count: int) -> list[LoggedDecision]: ...
    async def set_threads(self, channel_id: int, guild_id: int, on: bool) -> None: ...
    async def forget(self, channel_id: int, guild_id: int) -> bool: ...
    def restore_conversation(self, channel_id: int, messages: list[ModelMessage]) -> None: ...


def operated(interaction: discord.Interaction) -> Operated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    client: Any = interaction.client
    return cast(Operated, client)


UsagePeriod = Literal["day", "week", "month"]
WHY_DEFAULT_COUNT = 10
WHY_MAX_COUNT = KEPT_PER_CHANNEL

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
        guild_id, channel_id = _place(interaction)
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
        guild_id, channel_id = _profile_place(interaction)
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
        guild_id, channel_id = _place(interaction)
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
        guild_id, channel_id = _place(interaction)
        try:
            ended = await operated(interaction).forget(channel_id, guild_id)
        except ArchiveWriteFailed:
            raise Refusal(
                "Nothing was forgotten: the archive could not save it; the details are in Parley's log."
            ) from None
        await send_ephemeral(interaction, FORGOTTEN if ended else NOTHING_TO_FORGET)

    @app_commands.command(description="Parley's conversation in this channel: since when, with whom, how long.")
    async def status(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = _place(interaction)
        client = operated(interaction)
        text = "\n".join(
            [
                describe_status(client.manager.get(channel_id), client.mode_of(channel_id)),
                describe_shard(guild_id, client.shard_count),
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
        guild_id, _ = _place(interaction)
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


def message_link(guild_id: int, channel_id: int, message_id: int) -> str:
    return f"https://discord.com/channels/{guild_id}/{channel_id}/{message_id}"


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


# --- /parley profile show | set | reset --------------------------------------------------------

PROFILE_FIELD_NAMES = {
    "persona": "persona",
    "model": "model",
    "judge_model": "judge model",
    "tools": "tools",
    "mode": "mode",
}
SOURCE_NAMES = {
    Source.CHANNEL_COMMAND: "set for this channel by command",
    Source.CHANNEL_FILE: "this channel's entry in PROFILES_FILE",
    Source.SERVER_COMMAND: "the server default, set by command",
    Source.SERVER_FILE: "the server's entry in PROFILES_FILE",
    Source.DEFAULT: "default",
}
DEFAULT_SOURCES = {
    "persona": "none",
    "model": "LLM_MODEL",
    "judge_model": "JUDGE_MODEL",
    "tools": "every tool set that is on",
    "mode": "normal",
}
PERSONA_SHOWN_CHARS = 300
# Discord shows at most 25 autocomplete choices.
AUTOCOMPLETE_MAX = 25


class ProfileCommands(
    app_commands.Group, name="profile", description="Parley's persona, model, tools and mode here, or the server's."
):
    """`/parley profile show | set | reset`: this channel's profile (a thread follows its channel), or the server's
    default (`scope: server`); each value says where it comes from."""

    @app_commands.command(description="Parley's persona, model, tools and mode here, and where each comes from.")
    @app_commands.describe(scope="channel: this channel's profile (default); server: the server default")
    async def show(self, interaction: discord.Interaction, scope: Scope = "channel") -> None:
        guild_id, channel_id = _profile_place(interaction)
        profiles = operated(interaction).profiles
        profile = profiles.resolve(guild_id, None if scope == "server" else channel_id)
        await send_ephemeral(
            interaction,
            describe_profile(profile.values, channel_id if scope == "channel" else None, profiles),
            allowed_mentions=discord.AllowedMentions.none(),
        )

    @app_commands.command(description="Change one setting of this channel's profile, or the server default's.")
    @app_commands.describe(
        setting="What to change",
        value="persona: the instructions; model, judge_model: an allowed model; tools: all, none, or names"
        " (archive, memory, web, mcp:<server>) separated by commas; mode: mention-only, normal or chatty",
        scope="channel (Manage Channels; default) or server (Manage Server)",
    )
    async def set(
        self, interaction: discord.Interaction, setting: ProfileField, value: str, scope: Scope = "channel"
    ) -> None:
        guild_id, channel_id = _profile_place(interaction)
        _may_change(interaction, scope)
        # Discord offers only the choices, but a request can still say otherwise.
        if setting not in FIELDS:
            raise Refusal(f"Unknown setting {setting!r}: choose {', '.join(FIELDS)}.")
        client = operated(interaction)
        try:
            stored = await client.profiles.set_value(scope, guild_id, channel_id, setting, value, interaction.user.id)
        except ValueError as error:
            raise Refusal(f"Not changed: {error}.") from None
        except ArchiveWriteFailed:
            raise Refusal(
                "The profile could not be saved, so it is unchanged; the details are in Parley's log."
            ) from None
        await send_ephemeral(
            interaction,
            describe_profile_change(
                setting, stored, channel_id if scope == "channel" else None, client.archive is not None
            ),
            allowed_mentions=discord.AllowedMentions.none(),
        )

    @set.autocomplete("value")
    async def _suggest_values(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Makes the allowed models and the modes discoverable while typing; any value is still checked on use.
        setting = getattr(interaction.namespace, "setting", None)
        found = [value for value in value_suggestions(setting, operated(interaction).profiles) if current in value]
        return [app_commands.Choice(name=value, value=value) for value in found[:AUTOCOMPLETE_MAX]]

    @app_commands.command(description="Undo the commands' changes to this channel's profile or the server default.")
    @app_commands.describe(
        setting="What to reset (default: all of them)",
        scope="channel (Manage Channels; default) or server (Manage Server)",
    )
    async def reset(
        self,
        interaction: discord.Interaction,
        setting: ProfileField | None = None,
        scope: Scope = "channel",
    ) -> None:
        guild_id, channel_id = _profile_place(interaction)
        _may_change(interaction, scope)
        names = FIELDS if setting is None else (setting,)
        try:
            dropped = await operated(interaction).profiles.reset_values(scope, guild_id, channel_id, names)
        except ArchiveWriteFailed:
            raise Refusal("The profile could not be reset, so it is unchanged; see Parley's log.") from None
        where = f"<#{channel_id}>" if scope == "channel" else "the server default"
        if not dropped:
            text = f"No command had changed {_names(names)} of {where}: nothing to reset."
        else:
            text = (
                f"Reset {_names(dropped)} of {where} from the next message on: PROFILES_FILE or the next"
                " broader profile applies again (/parley profile show says which)."
            )
        await send_ephemeral(interaction, text)


def value_suggestions(setting: str | None, profiles: Profiles) -> list[str]:
    """What `/parley profile set` offers while `value` is typed, for the chosen setting."""
    if setting in ("model", "judge_model"):
        return list(profiles.settings.allowed_models)
    if setting == "mode":
        return list(CHANNEL_MODES)
    if setting == "tools":
        return [ALL_TOOLS, NO_TOOLS, ARCHIVE, MEMORY, f"{ARCHIVE},{MEMORY}"]
    return []


def _profile_place(interaction: discord.Interaction) -> tuple[int, int]:
    """The server and the channel whose profile a command is about: in a thread, its parent channel's."""
    guild_id, channel_id = _place(interaction)
    _, followed = operated(interaction).profile_place(channel_id)
    return guild_id, followed


def _may_change(interaction: discord.Interaction, scope: Scope) -> None:
    permissions = interaction.permissions
    if scope == "server" and not permissions.manage_guild:
        raise Refusal("You need the Manage Server permission to change the server default profile.")
    if scope != "server" and not permissions.manage_channels:
        raise app_commands.MissingPermissions(["manage_channels"])


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"**{PROFILE_FIELD_NAMES[name]}**" for name in names)


def describe_profile(values: Mapping[ProfileField, Value], channel_id: int | None, profiles: Profiles) -> str:
    """What `/parley profile show` says: each value and where it comes from (for the server default: channel None)."""
    header = f"Parley's profile in <#{channel_id}>:" if channel_id else "This server's default profile:"
    lines = [header, *(describe_value(name, values[name]) for name in FIELDS)]
    lines.append(f"Models allowed: {', '.join(profiles.settings.allowed_models)}.")
    return "\n".join(lines)


def describe_value(name: ProfileField, value: Value) -> str:
    """One `show` line: the value and its source, with who set it and when for a command's."""
    source = SOURCE_NAMES[value.source]
    if value.source is Source.DEFAULT:
        source += f": {DEFAULT_SOURCES[name]}"
    if value.set_by is not None:
        source += f" by <@{value.set_by}>"
    if value.set_at is not None:
        source += f" {discord_time(value.set_at)}"
    return f"**{PROFILE_FIELD_NAMES[name]}**: {_shown_value(name, value.value)} ({source})"


def _shown_value(name: ProfileField, value: str) -> str:
    if name != "persona":
        return f"`{value}`"
    if not value:
        return "none"
    shown = value if len(value) <= PERSONA_SHOWN_CHARS else value[:PERSONA_SHOWN_CHARS] + "…"
    return f"“{discord.utils.escape_markdown(' '.join(shown.split()))}”"


def describe_profile_change(name: ProfileField, value: str, channel_id: int | None, kept: bool) -> str:
    """What `/parley profile set` says once a value is set; `kept`: whether it outlives a restart."""
    where = f"In <#{channel_id}>" if channel_id else "Across the server, where a channel sets nothing else,"
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"{where} the {PROFILE_FIELD_NAMES[name]} is {_shown_value(name, value)} from the next message on.{lasting}"


# --- /parley memory list | forget, /parley context save | list | restore ------------------------

MEMORY_LIST_MAX = 25
MEMORY_FACT_SHOWN_CHARS = 200
ABOUT_ME = "about-me"
CHANNEL = "channel"
MEMORY_OFF = "Parley keeps no memories here: the archive is off (DATABASE_URL is empty)."
CHANNEL_MEMORIES_HIDDEN = (
    "This channel's own memories are not listed: they come from its history, which you lack the Read Message"
    " History permission to read here."
)


class MemoryCommands(app_commands.Group, name="memory", description="What Parley remembers here, and forgetting it."):
    """`/parley memory list` and `/parley memory forget`: facts members asked Parley to remember."""

    @app_commands.command(name="list", description="What Parley remembers in this channel, and about you.")
    async def list_memories(self, interaction: discord.Interaction) -> None:
        guild_id, channel_id = _place(interaction)
        store = _memory(interaction)
        # The channel's facts are copies of its history: a member who may not read it sees only their own.
        reads_history = interaction.permissions.read_message_history
        found = await store.visible(
            guild_id=guild_id,
            channel_id=channel_id,
            member_id=interaction.user.id,
            limit=MEMORY_LIST_MAX,
            channel_facts=reads_history,
        )
        text = describe_memories(found, interaction.user.id)
        if not reads_history:
            text += f"\n{CHANNEL_MEMORIES_HIDDEN}"
        await send_ephemeral(interaction, text, suppress_embeds=True)

    @app_commands.command(description="Delete memories: about-me, channel (Manage Messages), or one memory's id.")
    @app_commands.describe(target="about-me: what is about you or told by you; channel: this channel's; or a memory id")
    async def forget(self, interaction: discord.Interaction, target: str) -> None:
        guild_id, channel_id = _place(interaction)
        store = _memory(interaction)
        member_id = interaction.user.id
        may_manage = interaction.permissions.manage_messages
        target = target.strip().lower()
        if target == ABOUT_ME:
            ids = await store.about_member(guild_id=guild_id, member_id=member_id)
        elif target == CHANNEL:
            if not may_manage:
                raise app_commands.MissingPermissions(["manage_messages"])
            ids = await store.in_channel(channel_id)
        elif target.isdigit():
            memory = await store.get(int(target))
            if memory is None or memory.guild_id != guild_id:
                raise Refusal(f"There is no memory {target} in this server.")
            own = member_id in (memory.about_id, memory.said_by_id)
            if not own and not (may_manage and memory.channel_id == channel_id):
                raise Refusal(
                    f"Memory {target} is neither about you nor told by you; Manage Messages in the channel it"
                    " was made in can delete it there."
                )
            ids = [memory.id]
        else:
            raise Refusal(f"Choose what to forget: {ABOUT_ME}, {CHANNEL}, or a memory id from /parley memory list.")
        try:
            count = await store.forget(ids)
        except ArchiveWriteFailed:
            raise Refusal("Not everything was forgotten: the archive could not save it; see Parley's log.") from None
        await send_ephemeral(interaction, f"Forgot {count} memor{'y' if count == 1 else 'ies'}.")


class ContextCommands(
    app_commands.Group, name="context", description="Save this channel's conversation under a name and restore it."
):
    """`/parley context save | list | restore`: named copies of the channel's conversation model history."""

    @app_commands.command(description="Save this channel's conversation with Parley under a name.")
    @app_commands.describe(name="A short name to restore it by later")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def save(self, interaction: discord.Interaction, name: str) -> None:
        guild_id, channel_id = _place(interaction)
        store = _memory(interaction)
        name = snapshot_name(name)
        conversation = operated(interaction).manager.get(channel_id)
        if conversation is None or not conversation.llm_history:
            raise Refusal("There is no conversation with Parley in this channel to save.")
        try:
            await store.save_snapshot(
                guild_id=guild_id,
                channel_id=channel_id,
                name=name,
                saved_by=interaction.user.id,
                messages=conversation.llm_history,
            )
        except ArchiveWriteFailed:
            raise Refusal("The conversation could not be saved; the details are in Parley's log.") from None
        count = len(conversation.llm_history)
        await send_ephemeral(interaction, f"Saved this conversation ({count} model messages) as **{name}**.")

    @app_commands.command(name="list", description="The conversations saved in this channel.")
    async def list_snapshots(self, interaction: discord.Interaction) -> None:
        _, channel_id = _place(interaction)
        snapshots = await _memory(interaction).snapshots(channel_id)
        await send_ephemeral(
            interaction, describe_snapshots(snapshots), allowed_mentions=discord.AllowedMentions.none()
        )

    @app_commands.command(description="Continue a saved conversation: it replaces this channel's current one.")
    @app_commands.describe(name="The name it was saved under")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def restore(self, interaction: discord.Interaction, name: str) -> None:
        _, channel_id = _place(interaction)
        name = snapshot_name(name)
        messages = await _memory(interaction).load_snapshot(channel_id, name)
        if messages is None:
            raise Refusal(f"No conversation is saved as **{name}** in this channel; /parley context list shows them.")
        operated(interaction).restore_conversation(channel_id, messages)
        timeout = round(operated(interaction).settings.conversation_timeout_seconds)
        await send_ephemeral(
            interaction,
            f"Restored **{name}** ({len(messages)} model messages): it is this channel's conversation now;"
            f" an @mention within {timeout} seconds of quiet continues it.",
        )


def _memory(interaction: discord.Interaction) -> MemoryStore:
    store = operated(interaction).memory
    if store is None:
        raise Refusal(MEMORY_OFF)
    return store


def snapshot_name(name: str) -> str:
    """A snapshot name as stored: one line, trimmed, at most SNAPSHOT_NAME_MAX_CHARS; refused when empty."""
    cleaned = " ".join(name.split())[:SNAPSHOT_NAME_MAX_CHARS]
    if not cleaned:
        raise Refusal("Give the conversation a name.")
    return cleaned


def describe_memories(memories: Sequence[Memory], member_id: int) -> str:
    """What `/parley memory list` says: one line per fact, newest first, with its id, whose it is and its source."""
    if not memories:
        return "Parley remembers nothing in this channel or about you."
    lines = [f"What Parley remembers here and about you, newest first ({len(memories)}):"]
    for memory in memories:
        shown = (
            memory.fact if len(memory.fact) <= MEMORY_FACT_SHOWN_CHARS else memory.fact[:MEMORY_FACT_SHOWN_CHARS] + "…"
        )
        fact = discord.utils.escape_markdown(shown)
        about = "about you" if memory.about_id == member_id else f"in <#{memory.channel_id}>"
        source = message_link(memory.guild_id, memory.channel_id, memory.source_message_id)
        lines.append(
            f"`{memory.id}` {about}, told by <@{memory.said_by_id}> {discord_time(memory.created_at)}:"
            f" “{fact}” [source]({source})"
        )
    return "\n".join(lines)


def describe_snapshots(snapshots: Sequence[Snapshot]) -> str:
    """What `/parley context list` says: each saved conversation's name, size, who saved it and when."""
    if not snapshots:
        return "No conversations are saved in this channel; /parley context save <name> saves the current one."
    return "\n".join(
        [
            "Saved conversations in this channel, newest first:",
            *(
                f"**{discord.utils.escape_markdown(snapshot.name)}**: {snapshot.messages} model messages, saved by"
                f" <@{snapshot.saved_by}> {discord_time(snapshot.saved_at)}"
                for snapshot in snapshots
            ),
        ]
    )
