"""`/parley memory list | forget` and `/parley-admin context save | list | restore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import discord
from discord import app_commands
from pydantic_ai.messages import ModelMessage

from archive import ArchiveWriteFailed
from commands.embeds import Field, paginate, reply_embed, send_embeds, server_colour
from commands.tree import Refusal, place_of, send_ephemeral
from config import Settings
from conversation import ConversationManager
from discord_io import discord_time, message_link
from memory.store import SNAPSHOT_NAME_MAX_CHARS, Memory, MemoryStore, Snapshot


class MemoryOperated(Protocol):
    """The client, as the memory and context commands see it (bot.py's Parley)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def manager(self) -> ConversationManager: ...
    @property
    def memory(self) -> MemoryStore | None: ...

    def restore_conversation(self, channel_id: int, messages: list[ModelMessage]) -> None: ...


def operated(interaction: discord.Interaction) -> MemoryOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(MemoryOperated, interaction.client)


MEMORY_LIST_MAX = 25
MEMORY_FACT_SHOWN_CHARS = 200
MEMORY_TITLE = "What Parley remembers"
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
        guild_id, channel_id = place_of(interaction)
        store = memory_store(interaction)
        # The channel's facts are copies of its history: a member who may not read it sees only their own.
        reads_history = interaction.permissions.read_message_history
        found = await store.visible(
            guild_id=guild_id,
            channel_id=channel_id,
            member_id=interaction.user.id,
            limit=MEMORY_LIST_MAX,
            channel_facts=reads_history,
        )
        colour = server_colour(interaction.guild)
        await send_embeds(interaction, memories_embeds(found, interaction.user.id, colour, hidden=not reads_history))

    @app_commands.command(description="Delete memories: about-me, channel (Manage Messages), or one memory's id.")
    @app_commands.describe(target="about-me: what is about you or told by you; channel: this channel's; or a memory id")
    async def forget(self, interaction: discord.Interaction, target: str) -> None:
        guild_id, channel_id = place_of(interaction)
        store = memory_store(interaction)
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
    """`/parley-admin context save | list | restore`: named copies of the channel's conversation model history."""

    @app_commands.command(description="Save this channel's conversation with Parley under a name.")
    @app_commands.describe(name="A short name to restore it by later")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def save(self, interaction: discord.Interaction, name: str) -> None:
        guild_id, channel_id = place_of(interaction)
        store = memory_store(interaction)
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
        _, channel_id = place_of(interaction)
        snapshots = await memory_store(interaction).snapshots(channel_id)
        await send_ephemeral(
            interaction, describe_snapshots(snapshots), allowed_mentions=discord.AllowedMentions.none()
        )

    @app_commands.command(description="Continue a saved conversation: it replaces this channel's current one.")
    @app_commands.describe(name="The name it was saved under")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def restore(self, interaction: discord.Interaction, name: str) -> None:
        _, channel_id = place_of(interaction)
        name = snapshot_name(name)
        messages = await memory_store(interaction).load_snapshot(channel_id, name)
        if messages is None:
            raise Refusal(
                f"No conversation is saved as **{name}** in this channel; /parley-admin context list shows them."
            )
        operated(interaction).restore_conversation(channel_id, messages)
        timeout = round(operated(interaction).settings.conversation_timeout_seconds)
        await send_ephemeral(
            interaction,
            f"Restored **{name}** ({len(messages)} model messages): it is this channel's conversation now;"
            f" an @mention within {timeout} seconds of quiet continues it.",
        )


def memory_store(interaction: discord.Interaction) -> MemoryStore:
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


def memories_embeds(
    memories: Sequence[Memory], member_id: int, colour: discord.Colour, *, hidden: bool
) -> list[discord.Embed]:
    """What `/parley memory list` shows: a field per fact, newest first, with its id, whose it is, who told it, when
    and its source; `hidden`: the channel's own facts were left out (the member may not read its history)."""
    notes = [CHANNEL_MEMORIES_HIDDEN] if hidden else []
    if not memories:
        description = "\n".join(["Parley remembers nothing in this channel or about you.", *notes])
        return [reply_embed(MEMORY_TITLE, colour, description=description)]
    head = reply_embed(
        MEMORY_TITLE,
        colour,
        description="\n".join([f"Here and about you, newest first ({len(memories)}).", *notes]),
        footer="Newest remembered",
        timestamp=memories[0].created_at,
    )
    return paginate(head, [memory_field(memory, member_id) for memory in memories])


def memory_field(memory: Memory, member_id: int) -> Field:
    """One remembered fact: named by its id (what `/parley memory forget` takes) and whose it is."""
    shown = memory.fact if len(memory.fact) <= MEMORY_FACT_SHOWN_CHARS else memory.fact[:MEMORY_FACT_SHOWN_CHARS] + "…"
    fact = discord.utils.escape_markdown(shown)
    if memory.about_id == member_id:
        about = "about you"
    else:
        about = "told by you" if memory.said_by_id == member_id else "this channel's"
    source = message_link(memory.guild_id, memory.channel_id, memory.source_message_id)
    told = f"told by <@{memory.said_by_id}> in <#{memory.channel_id}> {discord_time(memory.created_at)}"
    return Field(f"{memory.id} · {about}", f"“{fact}”\n{told} · [source]({source})")


def describe_snapshots(snapshots: Sequence[Snapshot]) -> str:
    """What `/parley-admin context list` says: each saved conversation's name, size, who saved it and when."""
    if not snapshots:
        return "No conversations are saved in this channel; /parley-admin context save <name> saves the current one."
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
