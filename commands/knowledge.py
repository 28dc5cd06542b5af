"""`/parley-admin knowledge add | list | remove | pins`: the documents of the server's knowledge base (knowledge/),
which Parley's `search_knowledge` tool searches and its answers cite; `pins` (commands/knowledge_pins.py) takes a
channel's pinned messages in.

Adding or removing a document changes what every channel's answers may draw on, so it takes Manage Server;
listing takes the admins' group's Manage Messages and shows a channel's pins only to members who may read it. A
file is read whole or refused with one line (its size, its kind, its pages), and only a whole document is stored:
nothing is ever half-added.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol, cast

import discord
from discord import app_commands

from archive import ArchiveWriteFailed
from archive.knowledge_types import KnowledgeDocument, KnowledgeDocumentInfo
from commands.embeds import Field, clip, paginate, reply_embed, send_embeds, server_colour
from commands.knowledge_pins import PinSetting, answer_pins
from commands.tree import Refusal, place_of, send_ephemeral
from discord_io import discord_time
from edge.readable import readable_channel_ids
from knowledge.base import KnowledgeBase, KnowledgeFull
from knowledge.reading import DocumentReader, DocumentRefused


class KnowledgeOperated(Protocol):
    """The client, as the /parley-admin knowledge commands see it (bot.py's Parley)."""

    @property
    def knowledge(self) -> KnowledgeBase | None: ...


def operated(interaction: discord.Interaction) -> KnowledgeOperated:
    """The client an interaction came to; discord.py types it as any client, and only Parley's tree runs these."""
    return cast(KnowledgeOperated, interaction.client)


log = logging.getLogger("parley.knowledge")

# How long the file's download from Discord's CDN may take.
DOWNLOAD_SECONDS = 60
KNOWLEDGE_OFF = "Parley keeps no knowledge base here: the archive is off (DATABASE_URL is empty)."
KNOWLEDGE_TITLE = "Knowledge base"
FILE_SOURCE = "file:"
TITLE_MAX_CHARS = 100


class KnowledgeCommands(
    app_commands.Group, name="knowledge", description="The server's documents Parley searches and cites."
):
    """`/parley-admin knowledge add | list | remove | pins`."""

    def __init__(self) -> None:
        super().__init__()
        self.reader = DocumentReader()

    @app_commands.command(description="Add a text, Markdown or PDF file to this server's knowledge base.")
    @app_commands.describe(
        file="The document: .txt, .md or .pdf; a file with the same name already added is replaced",
        title="How answers name it (default: the file's name)",
    )
    @app_commands.checks.has_permissions(manage_guild=True)
    async def add(self, interaction: discord.Interaction, file: discord.Attachment, title: str | None = None) -> None:
        knowledge = knowledge_base(interaction)
        guild_id, _ = place_of(interaction)
        name = document_title(title or file.filename)
        try:
            self.reader.check_size(file.size)  # before downloading it
        except DocumentRefused as refused:
            raise Refusal(f"**{escaped(file.filename)}** was not added: {refused}") from None
        # Reading a PDF may take longer than the 3 seconds Discord waits for an answer.
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            async with asyncio.timeout(DOWNLOAD_SECONDS):
                data = await file.read()
            read = await self.reader.read(file.filename, name, data)
            document = KnowledgeDocument(
                guild_id, FILE_SOURCE + file.filename, name, read.sections, interaction.user.id, datetime.now(UTC)
            )
            document_id = await knowledge.add(document)
        except (DocumentRefused, KnowledgeFull) as refused:
            raise Refusal(f"**{escaped(file.filename)}** was not added: {refused}") from None
        except (discord.HTTPException, TimeoutError):
            raise Refusal(f"**{escaped(file.filename)}** could not be downloaded from Discord; try again.") from None
        except ArchiveWriteFailed:
            raise Refusal(
                f"**{escaped(file.filename)}** could not be stored, so nothing changed; see Parley's log."
            ) from None
        count = len(read.sections)
        log.info(
            "knowledge: %s added as document %s (%d sections) in server %s by %s",
            document.source, document_id, count, guild_id, interaction.user.id,
        )  # fmt: skip
        await send_ephemeral(
            interaction,
            f"Added **{escaped(name)}** ({read.kind}, {count} section{'' if count == 1 else 's'}) to this server's"
            " knowledge base; Parley's answers can search and cite it from now on.",
        )

    @app_commands.command(name="list", description="The documents in this server's knowledge base.")
    @app_commands.checks.has_permissions(manage_messages=True)
    async def list_documents(self, interaction: discord.Interaction) -> None:
        guild_id, _ = place_of(interaction)
        documents = readable_documents(interaction, await knowledge_base(interaction).documents(guild_id))
        await send_embeds(interaction, documents_embeds(documents, server_colour(interaction.guild)))

    @app_commands.command(description="Remove a document from this server's knowledge base.")
    @app_commands.describe(document="The document's id, as /parley-admin knowledge list shows it")
    @app_commands.checks.has_permissions(manage_guild=True)
    async def remove(self, interaction: discord.Interaction, document: int) -> None:
        guild_id, _ = place_of(interaction)
        try:
            removed = await knowledge_base(interaction).remove(guild_id, document)
        except ArchiveWriteFailed:
            raise Refusal(f"Document {document} could not be removed; see Parley's log.") from None
        if not removed:
            raise Refusal(f"There is no document {document} in this server; /parley-admin knowledge list shows them.")
        log.info("knowledge: document %s removed in server %s by %s", document, guild_id, interaction.user.id)
        await send_ephemeral(interaction, f"Removed document {document}: answers no longer find it.")

    @app_commands.command(description="Whether this channel's pinned messages are part of the knowledge base.")
    @app_commands.describe(setting="on: take this channel's pins in and keep them in step; off: remove them; status")
    @app_commands.checks.has_permissions(manage_channels=True)
    async def pins(self, interaction: discord.Interaction, setting: PinSetting) -> None:
        await answer_pins(interaction, setting)


def knowledge_base(interaction: discord.Interaction) -> KnowledgeBase:
    knowledge = operated(interaction).knowledge
    if knowledge is None:
        raise Refusal(KNOWLEDGE_OFF)
    return knowledge


def readable_documents(
    interaction: discord.Interaction, documents: Sequence[KnowledgeDocumentInfo]
) -> list[KnowledgeDocumentInfo]:
    """The documents the member may be shown: server-wide ones, and a channel's (pins: titled by their text) only if
    they may read that channel, as Discord would show them its pins."""
    user, guild = interaction.user, interaction.guild
    readable = readable_channel_ids(guild, user) if guild is not None and isinstance(user, discord.Member) else ()
    return [document for document in documents if document.channel_id is None or document.channel_id in readable]


def document_title(text: str) -> str:
    """A title as stored: one line, trimmed, at most TITLE_MAX_CHARS; refused when empty."""
    cleaned = " ".join(text.split())[:TITLE_MAX_CHARS]
    if not cleaned:
        raise Refusal("Give the document a title.")
    return cleaned


def escaped(text: str) -> str:
    return discord.utils.escape_markdown(discord.utils.escape_mentions(text))


def documents_embeds(documents: Sequence[KnowledgeDocumentInfo], colour: discord.Colour) -> list[discord.Embed]:
    """What `/parley-admin knowledge list` shows: a field per document, oldest first, named by its id."""
    if not documents:
        description = "This server has no documents; /parley-admin knowledge add adds a text, Markdown or PDF file."
        return [reply_embed(KNOWLEDGE_TITLE, colour, description=description)]
    head = reply_embed(
        KNOWLEDGE_TITLE, colour, description=f"This server's documents, oldest first ({len(documents)})."
    )
    return paginate(head, [document_field(document) for document in documents])


def document_field(document: KnowledgeDocumentInfo) -> Field:
    """One document: its id (what `remove` takes) and title; where it came from, its size, who added it and when."""
    sections = f"{document.sections} section{'' if document.sections == 1 else 's'}"
    where = "" if document.channel_id is None else f" · pinned in <#{document.channel_id}>"
    added = f"added by <@{document.added_by}> {discord_time(document.added_at)}"
    # Shown as code, where Markdown is not read: only a backquote could end it.
    source = document.source.replace("`", "'")
    title = clip(discord.utils.escape_markdown(document.title), TITLE_MAX_CHARS)
    return Field(f"{document.id} · {title}", f"`{source}` · {sections}{where}\n{added}")
