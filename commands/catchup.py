"""`/parley catchup [since]`: a private summary of what the channel said since the member last looked."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import discord
from discord import app_commands
from pydantic_ai.usage import RunUsage

from admission.access import AccessVerdict, Asker, Place
from admission.optout import OptOuts
from admission.spending import Spending
from archive import ArchivedMessage, ChannelSettingsStore, MessageLog
from archive.null import archive_off
from catchup.reading import MAX_MESSAGES, Range, Since, SinceError, parse_since, questions_for, read_range
from catchup.writing import CatchUpWriter, Summary
from commands.tree import Refusal, place_of
from config import Settings
from discord_io import message_link, split_message, topic_lines
from edge.arrival import access_place
from usage.budget import UsageLedger

# A catch-up's posts: the summary of a long range fills a few.
CATCHUP_MAX_POSTS = 6
QUESTION_SHOWN_CHARS = 150
NO_ARCHIVE = "Catching up reads the archive, which is off here (DATABASE_URL is empty)."
NO_MODEL = "Catching up needs a model Parley can run itself; this deploy's LLM_MODEL names none."


class CatchUpArchive(MessageLog, ChannelSettingsStore, Protocol):
    """What a catch-up reads: the channel's messages and its forget marker."""


class CatchUpAgents(Protocol):
    @property
    def catchup(self) -> CatchUpWriter | None: ...


class CatchUpAdmission(Protocol):
    """The one admission path, as a catch-up asks it (admission/gatekeeper.py)."""

    @property
    def optouts(self) -> OptOuts: ...

    async def member_refusal(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> str | None: ...
    async def give_back(self, guild_id: int, member_id: int, role_ids: Collection[int]) -> None: ...
    def spending(self, guild_id: int, member_id: int | None, role_ids: Collection[int]) -> Spending: ...


class CatchUpAccess(Protocol):
    """Who may use Parley where, as an entry point that is no message asks it (admission/access_gate.py)."""

    async def asker(self, guild_id: int, user: discord.abc.Snowflake) -> Asker: ...

    def server_verdict(self, guild_id: int, place: Place, asker: Asker) -> AccessVerdict: ...


class CatchingUp(Protocol):
    """The client, as `/parley catchup` sees it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def archive(self) -> CatchUpArchive: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def agents(self) -> CatchUpAgents: ...
    @property
    def admission(self) -> CatchUpAdmission: ...
    @property
    def access(self) -> CatchUpAccess: ...


def catchup_command() -> app_commands.Command[Any, ..., None]:
    """A new `catchup` command for the members' group (one per client: a command belongs to one group)."""

    @app_commands.command(name="catchup", description="What was said here since you last looked, privately.")
    @app_commands.describe(since="3h, 2d, a link to a message here, or empty: since your own last message here")
    async def catchup(interaction: discord.Interaction, since: str | None = None) -> None:
        await catch_up(interaction, since)

    return catchup


async def catch_up(interaction: discord.Interaction, since_text: str | None) -> None:
    """Admit the member, read the range, summarise it with a progress line, and show the catch-up to them alone."""
    guild_id, channel_id = place_of(interaction)
    client = cast(CatchingUp, interaction.client)
    archive, writer = client.archive, client.agents.catchup
    if archive_off(archive):
        raise Refusal(NO_ARCHIVE)
    if writer is None:
        raise Refusal(NO_MODEL)
    # The catch-up quotes the channel's history: only for members who may read it.
    if not interaction.permissions.read_message_history:
        raise app_commands.MissingPermissions(["read_message_history"])
    try:
        since = parse_since(since_text, channel_id=channel_id, now=datetime.now(UTC))
    except SinceError as error:
        raise Refusal(str(error)) from None
    asker = await client.access.asker(guild_id, interaction.user)
    member_id, role_ids = asker.member_id, asker.role_ids
    # A catch-up is a model call for the member: the access lists come first, so a refusal spends nothing.
    if interaction.channel is not None:
        access = client.access.server_verdict(guild_id, access_place(interaction.channel), asker)
        if not access.allowed:
            raise Refusal(access.refusal)
    refusal = await client.admission.member_refusal(guild_id, member_id, role_ids)
    if refusal is not None:
        raise Refusal(refusal)
    await interaction.response.send_message(f"Reading what was said since {since.described}…", ephemeral=True)
    found = await read_range(
        archive, channel_id, since, member_id=member_id, forgotten_after=await archive.forget_marker(channel_id)
    )
    # What members who opted out wrote is not shown to the model: their messages count, as placeholders.
    found = replace(found, messages=client.admission.optouts.veil_archived(guild_id, found.messages))
    if not found.messages:
        await client.admission.give_back(guild_id, member_id, role_ids)
        await interaction.edit_original_response(content=f"Nothing was said here since {since.described}.")
        return

    async def progress(done: int, total: int) -> None:
        if done < total:
            await interaction.edit_original_response(
                content=f"Summarising {len(found.messages):,} messages: {done} of {total} parts done…"
            )

    def on_usage(usage: RunUsage) -> None:
        client.usage.record(guild_id, channel_id, member_id, usage.input_tokens, usage.output_tokens, kind="summary")

    # Each part's model call asks first: the member's tokens a day and the server's hold call by call.
    spending = client.admission.spending(guild_id, member_id, role_ids)
    summary = await writer.summarise(
        found.messages,
        budget_tokens=client.settings.catchup_token_budget,
        on_usage=on_usage,
        progress=progress,
        admitted=spending.admits,
    )
    questions = questions_for(member_id, found.messages)
    text = describe_catchup(summary, found, since, questions, guild_id, channel_id, stopped=spending.line)
    first, *rest = split_message(text, max_posts=CATCHUP_MAX_POSTS)
    none = discord.AllowedMentions.none()
    await interaction.edit_original_response(content=first, allowed_mentions=none)
    for part in rest:
        await interaction.followup.send(part, ephemeral=True, allowed_mentions=none, suppress_embeds=True)


def describe_catchup(
    summary: Summary,
    found: Range,
    since: Since,
    questions: Sequence[ArchivedMessage],
    guild_id: int,
    channel_id: int,
    *,
    stopped: str | None = None,
) -> str:
    """The catch-up: points grouped by topic in the order the topics came up, each with a jump link; then the
    questions asked of the member; then what was left out, and why a budget `stopped` it, if one did."""
    lines = [f"**Since {since.described}: {len(found.messages):,} messages.**"]
    lines.extend(topic_lines(summary.points, guild_id, channel_id))
    if not summary.points:
        lines.append("Nothing in it stood out to summarise.")
    if questions:
        lines.append("\n**Asked of you**")
        lines.extend(_question_line(question, guild_id, channel_id) for question in questions)
    if summary.left_out:
        lines.append(f"\n-# The {summary.left_out:,} oldest were left out, to stay within CATCHUP_TOKEN_BUDGET.")
    if found.more:
        lines.append(f"\n-# Only the newest {MAX_MESSAGES:,} messages were read.")
    if stopped is not None and summary.stopped_before:
        lines.append(f"\n-# {stopped} The newest {summary.stopped_before:,} messages are not summarised.")
    return "\n".join(lines)


def _question_line(message: ArchivedMessage, guild_id: int, channel_id: int) -> str:
    text = " ".join(message.content.split())
    if len(text) > QUESTION_SHOWN_CHARS:
        text = text[:QUESTION_SHOWN_CHARS] + "…"
    link = message_link(guild_id, channel_id, message.message_id)
    return f"- <@{message.author_id}>: “{discord.utils.escape_markdown(text)}” [jump]({link})"
