"""`/parley-admin profile show | set | reset`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, cast

import discord
from discord import app_commands

from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off
from commands.embeds import FIELD_VALUE_MAX, Field, paginate, reply_embed, send_embeds, server_colour
from commands.tree import Refusal, place_of, send_ephemeral
from discord_io import discord_time
from profiles.channels import ALL_TOOLS, FIELDS, FOOTER_MODES, NO_TOOLS, ProfileField, Profiles, Scope, Source, Value
from records import CHANNEL_MODES
from tools.registry import ARCHIVE, MEMORY


class ProfileOperated(Protocol):
    """The client, as the /parley-admin profile commands see it (bot.py's Parley)."""

    @property
    def archive(self) -> Archive: ...
    @property
    def profiles(self) -> Profiles: ...

    def profile_place(self, channel_id: int) -> tuple[int | None, int]: ...


def operated(interaction: discord.Interaction) -> ProfileOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(ProfileOperated, interaction.client)


PROFILE_FIELD_NAMES = {
    "persona": "persona",
    "model": "model",
    "judge_model": "judge model",
    "tools": "tools",
    "mode": "mode",
    "footer": "footer",
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
    "footer": "ANSWER_FOOTER",
}
PERSONA_SHOWN_CHARS = 300
# Discord shows at most 25 autocomplete choices.
AUTOCOMPLETE_MAX = 25


class ProfileCommands(
    app_commands.Group, name="profile", description="Parley's persona, model, tools and mode here, or the server's."
):
    """`/parley-admin profile show | set | reset`: this channel's profile (a thread follows its channel), or the
    server's default (`scope: server`); each value says where it comes from."""

    @app_commands.command(description="Parley's persona, model, tools and mode here, and where each comes from.")
    @app_commands.describe(scope="channel: this channel's profile (default); server: the server default")
    async def show(self, interaction: discord.Interaction, scope: Scope = "channel") -> None:
        guild_id, channel_id = profile_place_of(interaction)
        profiles = operated(interaction).profiles
        profile = profiles.resolve(guild_id, None if scope == "server" else channel_id)
        embed = profile_embed(
            profile.values,
            channel_id if scope == "channel" else None,
            profiles.settings.allowed_models,
            server_colour(interaction.guild),
        )
        await send_embeds(interaction, [embed])

    @app_commands.command(description="Change one setting of this channel's profile, or the server default's.")
    @app_commands.describe(
        setting="What to change",
        value="persona: the instructions; model, judge_model: an allowed model; tools: all, none, or names"
        " (archive, memory, knowledge, web, mcp:<server>) separated by commas; mode: mention-only, normal or chatty;"
        " footer: off, tokens or cost",
        scope="channel (Manage Channels; default) or server (Manage Server)",
    )
    async def set(
        self, interaction: discord.Interaction, setting: ProfileField, value: str, scope: Scope = "channel"
    ) -> None:
        guild_id, channel_id = profile_place_of(interaction)
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
                setting, stored, channel_id if scope == "channel" else None, not archive_off(client.archive)
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
        guild_id, channel_id = profile_place_of(interaction)
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
                " broader profile applies again (/parley-admin profile show says which)."
            )
        await send_ephemeral(interaction, text)


def value_suggestions(setting: str | None, profiles: Profiles) -> list[str]:
    """What `/parley-admin profile set` offers while `value` is typed, for the chosen setting."""
    if setting in ("model", "judge_model"):
        return list(profiles.settings.allowed_models)
    if setting == "mode":
        return list(CHANNEL_MODES)
    if setting == "footer":
        return list(FOOTER_MODES)
    if setting == "tools":
        return [ALL_TOOLS, NO_TOOLS, ARCHIVE, MEMORY, f"{ARCHIVE},{MEMORY}"]
    return []


def profile_place_of(interaction: discord.Interaction) -> tuple[int, int]:
    """The server and the channel whose profile a command is about: in a thread, its parent channel's."""
    guild_id, channel_id = place_of(interaction)
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


def profile_embed(
    values: Mapping[ProfileField, Value], channel_id: int | None, allowed: Sequence[str], colour: discord.Colour
) -> discord.Embed:
    """What `/parley-admin profile show` shows: a field per value with where it comes from (for the server default:
    channel None), the models allowed, and when a command last changed it."""
    where = f"In <#{channel_id}>" if channel_id else "Across the server, where a channel sets nothing else"
    changed = [value.set_at for value in values.values() if value.set_at is not None]
    head = reply_embed(
        "Parley's profile" if channel_id else "This server's default profile",
        colour,
        description=f"{where}: each value, and where it comes from.",
        footer="Last changed by command" if changed else "",
        timestamp=max(changed, default=None),
    )
    fields = [value_field(name, values[name]) for name in FIELDS]
    fields.append(Field("Models allowed", clip_list(allowed)))
    [embed] = paginate(head, fields, max_embeds=1)
    return embed


def value_field(name: ProfileField, value: Value) -> Field:
    """One `show` field: the value, then its source, with who set it and when for a command's."""
    source = SOURCE_NAMES[value.source]
    if value.source is Source.DEFAULT:
        source += f": {DEFAULT_SOURCES[name]}"
    if value.set_by is not None:
        source += f" by <@{value.set_by}>"
    if value.set_at is not None:
        source += f" {discord_time(value.set_at)}"
    return Field(PROFILE_FIELD_NAMES[name].capitalize(), f"{_shown_value(name, value.value)}\n{source}")


def clip_list(names: Sequence[str]) -> str:
    """`names` separated by commas, within a field's value: those that do not fit are counted instead."""
    # Room for the count, however many are left out.
    room = FIELD_VALUE_MAX - len(f" and {len(names)} more")
    shown: list[str] = []
    for name in names:
        if len(", ".join([*shown, f"`{name}`"])) > room:
            return ", ".join(shown) + f" and {len(names) - len(shown)} more"
        shown.append(f"`{name}`")
    return ", ".join(shown)


def _shown_value(name: ProfileField, value: str) -> str:
    if name != "persona":
        return f"`{value}`"
    if not value:
        return "none"
    shown = value if len(value) <= PERSONA_SHOWN_CHARS else value[:PERSONA_SHOWN_CHARS] + "…"
    return f"“{discord.utils.escape_markdown(' '.join(shown.split()))}”"


def describe_profile_change(name: ProfileField, value: str, channel_id: int | None, kept: bool) -> str:
    """What `/parley-admin profile set` says once a value is set; `kept`: whether it outlives a restart."""
    where = f"In <#{channel_id}>" if channel_id else "Across the server, where a channel sets nothing else,"
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"{where} the {PROFILE_FIELD_NAMES[name]} is {_shown_value(name, value)} from the next message on.{lasting}"
