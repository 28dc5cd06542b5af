"""`/parley-admin access allow | block | clear | show`: who may use Parley in this server, and where.

Each command names one target, a channel or category, a role or a member, through Discord's own pickers. Changing
the lists takes Manage Server; `show` lists every entry with where it comes from (a setting, or who set it and
when), like `/parley-admin profile show`. The rule itself is admission/access.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import discord
from discord import app_commands

from admission.access_gate import AccessGate
from admission.access_lists import AccessLists, Kind, Listed, Shown
from archive import Archive, ArchiveWriteFailed
from archive.null import archive_off
from commands.tree import Refusal, place_of, send_ephemeral
from discord_io import discord_time


class AccessOperated(Protocol):
    """The client, as the /parley-admin access commands see it (bot.py's Parley)."""

    @property
    def archive(self) -> Archive: ...
    @property
    def access(self) -> AccessGate: ...


def operated(interaction: discord.Interaction) -> AccessOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(AccessOperated, interaction.client)


RULE = "An empty allow list allows everything; a block wins over an allow; a thread follows its channel."
LIST_NAMES: dict[tuple[Kind, Listed], str] = {
    ("channel", "allow"): "Channels allowed",
    ("category", "allow"): "Categories allowed",
    ("channel", "block"): "Channels blocked",
    ("category", "block"): "Categories blocked",
    ("role", "allow"): "Roles allowed",
    ("role", "block"): "Roles blocked",
    ("member", "allow"): "Members allowed",
    ("member", "block"): "Members blocked",
}
EFFECTS: dict[tuple[str, Listed], str] = {
    ("channel", "allow"): "Parley answers only in the channels and categories allowed here",
    ("channel", "block"): "Parley answers no one there, and says nothing about it",
    ("role", "allow"): "only the members and roles allowed here may use Parley",
    ("role", "block"): "its members get no answer; each is told why once when they mention Parley",
    ("member", "allow"): "only the members and roles allowed here may use Parley",
    ("member", "block"): "they get no answer; they are told why once when they mention Parley",
}
TARGETS = {
    "channel": "a channel or category (a thread follows its channel)",
    "role": "a role",
    "member": "a member",
}


class AccessCommands(
    app_commands.Group, name="access", description="Who may use Parley in this server, and in which channels."
):
    """`/parley-admin access allow | block | clear | show`."""

    @app_commands.command(description="Let a channel, category, role or member use Parley (Manage Server).")
    @app_commands.describe(**TARGETS)
    @app_commands.checks.has_permissions(manage_guild=True)
    async def allow(
        self,
        interaction: discord.Interaction,
        channel: app_commands.AppCommandChannel | None = None,
        role: discord.Role | None = None,
        member: discord.User | None = None,
    ) -> None:
        await _put(interaction, "allow", _target(channel, role, member))

    @app_commands.command(description="Keep a channel, category, role or member from using Parley (Manage Server).")
    @app_commands.describe(**TARGETS)
    @app_commands.checks.has_permissions(manage_guild=True)
    async def block(
        self,
        interaction: discord.Interaction,
        channel: app_commands.AppCommandChannel | None = None,
        role: discord.Role | None = None,
        member: discord.User | None = None,
    ) -> None:
        await _put(interaction, "block", _target(channel, role, member))

    @app_commands.command(description="Drop the entry a command made for a channel, role or member (Manage Server).")
    @app_commands.describe(**TARGETS)
    @app_commands.checks.has_permissions(manage_guild=True)
    async def clear(
        self,
        interaction: discord.Interaction,
        channel: app_commands.AppCommandChannel | None = None,
        role: discord.Role | None = None,
        member: discord.User | None = None,
    ) -> None:
        target_id, kind = _target(channel, role, member)
        guild_id, _ = place_of(interaction)
        lists = operated(interaction).access.lists
        try:
            dropped = await lists.clear(guild_id, target_id)
        except ArchiveWriteFailed:
            raise Refusal("The entry could not be cleared, so it stays; the details are in Parley's log.") from None
        named = _named(target_id, kind)
        if dropped is None:
            text = f"No command had allowed or blocked {named}: nothing to clear."
        else:
            text = f"Cleared {named} from the {dropped.listed} list from the next message on."
        setting = _setting_naming(lists, guild_id, target_id)
        if setting is not None:
            text += f" {setting} still names it; only the deploy's settings can change that."
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())

    @app_commands.command(description="Every channel, category, role and member allowed or blocked here, and by whom.")
    async def show(self, interaction: discord.Interaction) -> None:
        guild_id, _ = place_of(interaction)
        text = describe_access(operated(interaction).access.lists.shown(guild_id))
        await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())


def _target(
    channel: app_commands.AppCommandChannel | None, role: discord.Role | None, member: discord.User | None
) -> tuple[int, Kind]:
    """The one target a command names, and its kind; a command naming none or several is refused."""
    given: list[tuple[int, Kind]] = []
    if channel is not None:
        given.append((channel.id, "category" if channel.type is discord.ChannelType.category else "channel"))
    if role is not None:
        given.append((role.id, "role"))
    if member is not None:
        given.append((member.id, "member"))
    if len(given) != 1:
        raise Refusal("Name exactly one channel (or category), role or member.")
    return given[0]


async def _put(interaction: discord.Interaction, listed: Listed, target: tuple[int, Kind]) -> None:
    target_id, kind = target
    guild_id, _ = place_of(interaction)
    client = operated(interaction)
    lists = client.access.lists
    try:
        await lists.put(guild_id, target_id, kind, listed, interaction.user.id)
    except ArchiveWriteFailed:
        raise Refusal("The entry could not be saved, so nothing changed; the details are in Parley's log.") from None
    text = describe_put(target_id, kind, listed, kept=not archive_off(client.archive))
    setting = _setting_naming(lists, guild_id, target_id)
    if setting is not None:
        text += f" {setting} names it too, and a block there stays a block."
    await send_ephemeral(interaction, text, allowed_mentions=discord.AllowedMentions.none())


def describe_put(target_id: int, kind: Kind, listed: Listed, *, kept: bool) -> str:
    """What `allow` or `block` says once the entry is kept; `kept`: whether it outlives a restart."""
    effect = EFFECTS[("channel" if kind == "category" else kind, listed)]
    done = "Allowed" if listed == "allow" else "Blocked"
    lasting = "" if kept else " It lasts until Parley restarts: the archive is off."
    return f"{done} {_named(target_id, kind)} from the next message on: {effect}. {RULE}{lasting}"


def describe_access(entries: Sequence[Shown]) -> str:
    """What `show` says: each list's entries with their source, or that there are none."""
    if not entries:
        return "No access lists here: Parley answers every member in every channel it can read."
    lines = [f"Access in this server. {RULE}"]
    for (kind, listed), name in LIST_NAMES.items():
        found = [entry for entry in entries if (entry.kind, entry.listed) == (kind, listed)]
        if found:
            lines.append(f"**{name}**: " + ", ".join(_described(entry) for entry in found))
    return "\n".join(lines)


def _described(entry: Shown) -> str:
    if entry.setting is not None:
        source = entry.setting
    else:
        source = "by command" + (f" by <@{entry.set_by}>" if entry.set_by is not None else "")
        if entry.set_at is not None:
            source += f" {discord_time(entry.set_at)}"
    return f"{_mention(entry.target_id, entry.kind)} ({source})"


def _named(target_id: int, kind: Kind) -> str:
    return f"the {kind} {_mention(target_id, kind)}"


def _mention(target_id: int, kind: str) -> str:
    if kind == "role":
        return f"<@&{target_id}>"
    if kind == "member":
        return f"<@{target_id}>"
    return f"<#{target_id}>"


def _setting_naming(lists: AccessLists, guild_id: int, target_id: int) -> str | None:
    return next(
        (entry.setting for entry in lists.shown(guild_id) if entry.target_id == target_id and entry.setting), None
    )
