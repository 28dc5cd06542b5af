"""End-to-end: an admin adds a Markdown handbook and a PDF with `/parley-admin knowledge add` (the file as Discord's
attachment option sends it: its id as the value, the attachment under `resolved`), a question is answered with a
quote of the section it comes from, and removal takes the document out of search; members cannot use the commands."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

import discord
import pytest

from archive.knowledge import KnowledgeDocument, KnowledgeSection
from tests.fakes.fake_discord import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    CHANNEL_ID,
    GUILD_ID,
    OTHER_CHANNEL_ID,
    FakeDiscord,
)
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCall, last_user_text, message_text
from tests.support.e2e_support import MEMBER, MODERATOR, RunningBot, group_command
from tests.support.hostile_files import text_pdf

ADMIN = MODERATOR | discord.Permissions(manage_guild=True)
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
HANDBOOK = b"""# Handbook

Welcome to the project.

## Install

### Docker

Run docker compose up; the web interface listens on port 8080.

## Backups

Backups run nightly at 02:00 and are kept for thirty days.
"""
PORT_QUOTE = "the web interface listens on port 8080"
# The first section of a search_knowledge result: its document, its section (when it has a heading), its quote.
SECTION = re.compile(r'<knowledge_section document="([^"]*)"(?: section="([^"]*)")?[^>]*>(.*?)</', re.S)


class KnowledgeModel:
    """A model that searches the knowledge base with the question's words, then answers quoting the first section
    it got and citing its document and section; it keeps each tool result it read."""

    def __init__(self) -> None:
        self.tool_results: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last["role"] == "tool":
            result = message_text(last)
            self.tool_results.append(result)
            found = re.search(
                r'<knowledge_section document="([^"]*)"(?: section="([^"]*)")?[^>]*>(.*?)</', result, re.S
            )
            if found is None:
                return "The documents don't cover that."
            document, section, quote = (html.unescape(part or "") for part in found.groups())
            return f'"{quote.strip()}" ({", ".join(filter(None, [document, section]))})'
        prompt = last_user_text(request)
        question = re.sub(r"<[^>]*>", " ", prompt[prompt.rindex("<new_message") :])
        offered = {tool["function"]["name"] for tool in request.get("tools", [])}
        if "search_knowledge" in offered and "?" in question:
            return ToolCall("search_knowledge", {"query": question})
        return "ok"


async def knowledge_command(
    fake: FakeDiscord,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    resolved: dict[str, Any] | None = None,
    permissions: discord.Permissions = ADMIN,
    user_id: int = ALICE_ID,
    posts: int = 1,
) -> str:
    """`/parley-admin knowledge <subcommand>` in #general; what the bot answered (after `posts` calls)."""
    return await group_command(
        fake, "knowledge", subcommand, options, resolved=resolved, permissions=permissions, user_id=user_id, posts=posts
    )


async def add_file(
    fake: FakeDiscord, filename: str, data: bytes, *, permissions: discord.Permissions = ADMIN, posts: int = 2
) -> str:
    """Add `data` as the file `filename`: the attachment option's value is its id, the attachment is resolved."""
    attachment = fake.served_attachment(filename, data)
    option = {"type": 11, "name": "file", "value": attachment["id"]}  # 11: ATTACHMENT
    resolved = {"attachments": {attachment["id"]: attachment}}
    # An add defers first (reading a file may take longer than Discord waits), then follows up: two calls.
    return await knowledge_command(fake, "add", [option], resolved=resolved, permissions=permissions, posts=posts)


async def ask(fake: FakeDiscord, text: str, author: int = BOB_ID) -> str:
    before = len(fake.posts_in(CHANNEL_ID))
    await fake.send_user_message(CHANNEL_ID, author, f"<@{BOT_ID}> {text}")
    await fake.wait_for_posts(before + 1, CHANNEL_ID)
    return fake.posts_in(CHANNEL_ID)[-1].content


def document_ids(listing: str) -> list[int]:
    return [int(number) for number in re.findall(r"^(\d+) · ", listing, re.M)]


async def test_a_handbook_added_by_an_admin_is_quoted_and_cited_until_it_is_removed(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    model = KnowledgeModel()
    llm.handler = model
    await bot.start()

    added = await add_file(fake, "handbook.md", HANDBOOK)
    assert "Added **handbook.md** (markdown, 3 sections)" in added
    answer = await ask(fake, "which port does docker listen on?")

    [result] = model.tool_results
    assert 'document="handbook.md" section="Handbook &gt; Install &gt; Docker"' in result
    assert PORT_QUOTE in result
    assert answer.startswith('"Run docker compose up; the web interface listens on port 8080."')
    assert answer.endswith("(handbook.md, Handbook > Install > Docker)")

    listing = await knowledge_command(fake, "list")
    [document_id] = document_ids(listing)
    assert "`file:handbook.md` · 3 sections" in listing
    removed = await knowledge_command(fake, "remove", [{"type": 4, "name": "document", "value": document_id}])
    assert removed == f"Removed document {document_id}: answers no longer find it."
    assert "no documents" in await knowledge_command(fake, "list")
    # No documents: the tool is not offered, and nothing is searched.
    assert await ask(fake, "which port does docker listen on?") == "ok"
    assert len(model.tool_results) == 1


async def test_members_without_manage_server_cannot_add_or_remove_documents(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    llm.handler = KnowledgeModel()
    client = await bot.start()

    refused = await add_file(fake, "handbook.md", HANDBOOK, permissions=MODERATOR, posts=1)
    assert refused == "You need the Manage Server permission in this channel to use /parley-admin knowledge add."
    assert "Manage Messages" in await knowledge_command(fake, "list", permissions=MEMBER)
    assert client.knowledge is not None and await client.knowledge.documents(GUILD_ID) == []


async def test_a_refused_file_is_one_line_and_adds_nothing(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    llm.handler = KnowledgeModel()
    client = await bot.start()

    refused = await add_file(fake, "photo.md", b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert refused.endswith(
        "**photo.md** was not added: Only text, Markdown and PDF files can be added to the knowledge base."
    )
    assert client.knowledge is not None and await client.knowledge.documents(GUILD_ID) == []


@pytest.mark.slow  # a PDF is read in a worker process
async def test_a_pdf_added_by_an_admin_is_searched(bot: RunningBot, fake: FakeDiscord, llm: FakeLLM) -> None:
    model = KnowledgeModel()
    llm.handler = model
    await bot.start()

    added = await add_file(fake, "rules.pdf", text_pdf("Rule one: be kind to the new members of the server."))
    assert "Added **rules.pdf** (pdf, 1 section)" in added
    answer = await ask(fake, "what is rule one about new members?")

    assert "be kind to the new members" in model.tool_results[-1]
    assert answer.startswith('"Rule one: be kind to the new members of the server."')


async def test_a_channels_document_is_found_only_for_members_who_may_read_that_channel(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    """A document tied to #random (as a pinned message is) is searched for Alice, who may read #random, and not for
    Bob, whom an overwrite keeps out of it: discord.py's own permissions of each asker decide."""
    model = KnowledgeModel()
    llm.handler = model
    fake.deny(OTHER_CHANNEL_ID, BOB_ID, discord.Permissions(view_channel=True))
    client = await bot.start()
    assert client.knowledge is not None
    pin = KnowledgeSection("", "The staging password rotates every Friday.")
    await client.knowledge.add(
        KnowledgeDocument(
            GUILD_ID, f"pin:{OTHER_CHANNEL_ID}:1", "Pinned in #random", [pin], ALICE_ID, NOW, OTHER_CHANNEL_ID
        )
    )

    assert await ask(fake, "when does the staging password rotate?", BOB_ID) == "The documents don't cover that."
    answer = await ask(fake, "when does the staging password rotate?", ALICE_ID)
    assert answer == '"The staging password rotates every Friday." (Pinned in #random)'
