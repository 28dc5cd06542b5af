"""`/parley-admin moderation channel | rules | watch | words | cases`: where case cards go, the rules the model reads
cases against, the watch lists (which channels' new messages are screened, and the words that send one to be), and
the server's cases and the actions taken (moderation/ has the rules).

Choosing the channel, the rules and the watch lists changes what every member's report or message does, so it takes
Manage Server; the cases list who reported whom, so it takes Moderate Members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal, Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed, ModerationLog
from archive.null import archive_off
from commands.tree import Refusal, place_of, send_ephemeral
from moderation.cards import jump_url
from moderation.prefilter import parsed_words
from records import ModerationAction, ModerationCase, ModerationSettings

NO_ARCHIVE = "Moderation keeps its cases in the archive, which is off here (DATABASE_URL is empty)."
NOT_SAVED = "The setting could not be saved, so it is unchanged; the details are in Parley's log."
CASES_SHOWN = 15
ACTIONS_SHOWN = 15
RULES_MAX_CHARS = 4000
WatchSetting = Literal["on", "off"]
WATCH_SETTINGS: tuple[str, ...] = ("on", "off")


class WatchLists(Protocol):
    """The watch lists this process screens by (moderation/screening.py's `Screening`)."""

    async def reload(self, guild_id: int) -> None: ...


class ModerationOperated(Protocol):
    """The client, as /parley-admin moderation sees it (bot.py's Parley)."""

    @property
    def archive(self) -> ModerationLog: ...
    @property
    def screening(self) -> WatchLists: ...


def operated(interaction: discord.Interaction) -> ModerationOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(ModerationOperated, interaction.client)


def moderation_archive(interaction: discord.Interaction) -> ModerationLog:
    """The archive the cases are kept in; a refusal when it is off."""
    archive = operated(interaction).archive
    if archive_off(archive):
        raise Refusal(NO_ARCHIVE)
    return archive


class ModerationCommands(
    app_commands.Group, name="moderation", description="Reports to the moderators: where they go, the rules, cases."
):
    """`/parley-admin moderation channel | rules | watch | words | cases`."""

    @app_commands.command(description="The channel where reported messages' case cards go; none: reports off.")
    @app_commands.describe(channel="Where case cards are posted (only staff should read it); leave empty to stop")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def channel(self, interaction: discord.Interaction, channel: discord.TextChannel | None = None) -> None:
        archive = moderation_archive(interaction)
        guild_id, _ = place_of(interaction)
        settings = await archive.moderation_settings(guild_id)
        changed = replace(settings, channel_id=None if channel is None else channel.id)
        await _save(archive, changed, interaction.user.id)
        if channel is None:
            reply = "Reports are off here: members who use Report to moderators are told so."
        else:
            reply = (
                f"Reported messages' case cards now go to <#{channel.id}>; whoever reads it sees the reported messages,"
                " so keep it to staff."
            )
            allowed = channel.permissions_for(channel.guild.me)
            if not (allowed.view_channel and allowed.send_messages and allowed.embed_links):
                reply += " Parley cannot post there yet: grant it View Channel, Send Messages and Embed Links."
        await send_ephemeral(interaction, reply)

    @app_commands.command(description="The rules the model reads reported messages against.")
    @app_commands.describe(
        text="The rules as text (replaces any set before)",
        document="Or the id of a knowledge base document that holds them (/parley-admin knowledge list)",
    )
    @app_commands.checks.has_permissions(manage_guild=True)
    async def rules(
        self, interaction: discord.Interaction, text: str | None = None, document: int | None = None
    ) -> None:
        archive = moderation_archive(interaction)
        guild_id, _ = place_of(interaction)
        settings = await archive.moderation_settings(guild_id)
        if text is None and document is None:
            await send_ephemeral(interaction, describe_rules(settings.rules, settings.rules_document_id))
            return
        if document is not None and await archive.rules_document(guild_id, document) is None:
            raise Refusal(f"This server's knowledge base has no document {document}: see /parley-admin knowledge list.")
        rules = text.strip()[:RULES_MAX_CHARS] if text is not None else settings.rules
        await _save(archive, replace(settings, rules=rules, rules_document_id=document), interaction.user.id)
        await send_ephemeral(interaction, describe_rules(rules, document))

    @app_commands.command(description="Whether Parley screens this channel's new messages against the rules.")
    @app_commands.describe(setting="on: messages the local pre-filter picks out are read, and flagged ones carded")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def watch(self, interaction: discord.Interaction, setting: WatchSetting) -> None:
        if setting not in WATCH_SETTINGS:
            raise Refusal(f"Unknown setting {setting!r}: choose on or off.")
        archive = moderation_archive(interaction)
        guild_id, channel_id = place_of(interaction)
        try:
            await archive.set_watched(
                channel_id, guild_id, setting == "on", set_by=interaction.user.id, now=datetime.now(UTC)
            )
        except ArchiveWriteFailed:
            raise Refusal(NOT_SAVED) from None
        await operated(interaction).screening.reload(guild_id)
        if setting == "off":
            reply = f"New messages in <#{channel_id}> are no longer screened."
        else:
            reply = (
                f"New messages in <#{channel_id}> are screened: those with a link from a member who joined in the last"
                " day, mass mentions, the same text in several channels, or a listed word"
                " (`/parley-admin moderation words`) are read against the rules, and flagged ones become case cards."
            )
            if (await archive.moderation_settings(guild_id)).channel_id is None:
                reply += " Choose a moderation channel for the cards first: `/parley-admin moderation channel`."
        await send_ephemeral(interaction, reply)

    @app_commands.command(description="The words that send a watched channel's message to be screened.")
    @app_commands.describe(words="Comma-separated words or phrases; none shows the list, `-` clears it")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def words(self, interaction: discord.Interaction, words: str | None = None) -> None:
        archive = moderation_archive(interaction)
        guild_id, _ = place_of(interaction)
        settings = await archive.moderation_settings(guild_id)
        if words is not None:
            settings = replace(settings, watch_words=() if words.strip() == "-" else parsed_words(words))
            await _save(archive, settings, interaction.user.id)
            await operated(interaction).screening.reload(guild_id)
        listed = ", ".join(f"`{word}`" for word in settings.watch_words)
        reply = (
            f"Watched channels' messages with these words are screened: {listed}."
            if listed
            else ("No words are listed: `/parley-admin moderation words words: scam, free nitro` lists some.")
        )
        await send_ephemeral(interaction, reply)

    @app_commands.command(description="This server's latest cases and moderation actions, or one member's.")
    @app_commands.describe(member="Only the cases about this member or reported by them, and the actions about them")
    @app_commands.checks.has_permissions(moderate_members=True)
    async def cases(self, interaction: discord.Interaction, member: discord.User | None = None) -> None:
        archive = moderation_archive(interaction)
        guild_id, _ = place_of(interaction)
        member_id = None if member is None else member.id
        found = await archive.moderation_cases(guild_id, member_id=member_id, limit=CASES_SHOWN)
        actions = await archive.moderation_actions(guild_id, member_id=member_id, limit=ACTIONS_SHOWN)
        await send_ephemeral(
            interaction, describe_cases(found, actions, member_id), allowed_mentions=discord.AllowedMentions.none()
        )


async def _save(archive: ModerationLog, settings: ModerationSettings, set_by: int) -> None:
    try:
        await archive.set_moderation_settings(settings, set_by=set_by, now=datetime.now(UTC))
    except ArchiveWriteFailed:
        raise Refusal(NOT_SAVED) from None


def describe_rules(rules: str, document_id: int | None) -> str:
    if document_id is not None:
        return f"Reported messages are read against knowledge base document {document_id}, marked as the rules."
    if rules:
        return f"Reported messages are read against these rules:\n>>> {rules}"
    return "No rules are set: reported messages are read against Discord's Community Guidelines."


def describe_cases(cases: Sequence[ModerationCase], actions: Sequence[ModerationAction], member_id: int | None) -> str:
    """The cases, newest first, then the actions, newest first: who, what, where, when."""
    about = "" if member_id is None else f" involving <@{member_id}>"
    lines = [f"**Cases{about}**, newest first:" if cases else f"No cases{about}."]
    for case in cases:
        state = "open" if case.is_open else "closed"
        rule = f"may break {case.rule!r} ({round(case.confidence * 100)}%)" if case.rule else "no rule named"
        reported = f"{case.reporters} report(s)" if case.reporters else "flagged by the watch list"
        link = jump_url(case.guild_id, case.channel_id, case.message_id)
        lines.append(
            f"#{case.id} <t:{int(case.opened_at.timestamp())}:R> about <@{case.author_id}> in <#{case.channel_id}>"
            f" ({link}): {state}, {reported}, {rule}"
        )
    lines.append(f"**Actions{about}**, newest first:" if actions else f"No actions{about}.")
    for action in actions:
        asked = "" if action.requested_by is None else f" asked by <@{action.requested_by}>"
        target = "" if action.target_member_id is None else f" on <@{action.target_member_id}>"
        case_of = "" if action.case_id is None else f" (case #{action.case_id})"
        detail = f": {action.detail}" if action.detail else ""
        lines.append(
            f"<t:{int(action.at.timestamp())}:R> <@{action.actor_id}> {action.action}{target}{asked}"
            f" in <#{action.channel_id}>{case_of}{detail}"
        )
    return "\n".join(lines)
