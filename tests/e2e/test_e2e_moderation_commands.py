"""End-to-end: `/parley-admin moderation channel | rules | cases`, with bot.py's client and the fakes: who may use
them, what they set, and what the cases list shows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import discord

from archive.knowledge_types import KnowledgeDocument, KnowledgeSection
from commands.moderation import NO_ARCHIVE
from tests.e2e.test_e2e_moderation import MOD_CHANNEL, RUDE, press, reported_card, start
from tests.fakes.fake_discord import ALICE_ID, BOB_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.fake_llm import FakeLLM, last_user_text
from tests.support.e2e_support import MEMBER, MODERATOR, RunningBot, group_command, option

ADMIN = MEMBER | discord.Permissions(manage_guild=True, manage_messages=True)
STAFF = MODERATOR | discord.Permissions(moderate_members=True)


async def moderation(
    fake: FakeDiscord,
    subcommand: str,
    options: list[dict[str, Any]] | None = None,
    *,
    permissions: discord.Permissions = ADMIN,
    resolved: dict[str, Any] | None = None,
) -> str:
    """`/parley-admin moderation <subcommand>` in #general; what Parley answered."""
    return await group_command(fake, "moderation", subcommand, options, resolved=resolved, permissions=permissions)


async def test_an_admin_chooses_the_moderation_channel_and_a_moderator_may_not(
    bot: RunningBot, fake: FakeDiscord
) -> None:
    client = await bot.start()
    channel = {"type": 7, "name": "channel", "value": str(MOD_CHANNEL)}
    resolved = {"channels": {str(MOD_CHANNEL): fake.channels[MOD_CHANNEL].payload() | {"permissions": "0"}}}
    refused = await moderation(fake, "channel", [channel], permissions=MODERATOR, resolved=resolved)
    assert refused == "You need the Manage Server permission in this channel to use /parley-admin moderation channel."
    assert (await client.archive.moderation_settings(GUILD_ID)).channel_id is None
    said = await moderation(fake, "channel", [channel], resolved=resolved)
    assert said.startswith(f"Reported messages' case cards now go to <#{MOD_CHANNEL}>")
    assert (await client.archive.moderation_settings(GUILD_ID)).channel_id == MOD_CHANNEL
    assert (await moderation(fake, "channel")).startswith("Reports are off here")
    assert (await client.archive.moderation_settings(GUILD_ID)).channel_id is None


async def test_the_rules_are_a_text_or_a_knowledge_base_document_the_model_reads(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    client = await start(bot, llm)
    said = await moderation(fake, "rules", [option("text", "1. Be excellent to each other.")])
    assert "1. Be excellent to each other." in said
    missing = await moderation(fake, "rules", [option("document", 999)])
    assert missing.startswith("This server's knowledge base has no document 999")
    sections = [KnowledgeSection("Rules", "7. No selling accounts.")]
    document = KnowledgeDocument(GUILD_ID, "file:rules.md", "Rules", sections, ALICE_ID, datetime.now(UTC))
    added = await client.archive.add_knowledge(document)
    said = await moderation(fake, "rules", [option("document", added.document_id)])
    assert f"document {added.document_id}, marked as the rules" in said
    await reported_card(fake, fake.add_history(CHANNEL_ID, BOB_ID, RUDE))
    assert "7. No selling accounts." in last_user_text(llm.requests[0])


async def test_cases_lists_the_cases_and_actions_to_members_with_moderate_members_only(
    bot: RunningBot, fake: FakeDiscord, llm: FakeLLM
) -> None:
    await start(bot, llm)
    card = await reported_card(fake, fake.add_history(CHANNEL_ID, BOB_ID, RUDE))
    await press(fake, card, "Delete")
    refused = await moderation(fake, "cases", permissions=MODERATOR)
    assert refused == "You need the Moderate Members permission in this channel to use /parley-admin moderation cases."
    listed = await moderation(fake, "cases", permissions=STAFF)
    assert "#1 <t:" in listed and f"about <@{BOB_ID}>" in listed and "open, 1 report(s)" in listed
    assert "delete" in listed and f"on <@{BOB_ID}>" in listed and "(case #1)" in listed
    member = {"type": 6, "name": "member", "value": str(ALICE_ID)}
    resolved = {"users": {str(ALICE_ID): fake.users[ALICE_ID].payload()}}
    alices = await moderation(fake, "cases", [member], permissions=STAFF, resolved=resolved)
    assert f"Cases involving <@{ALICE_ID}>" in alices and "#1 " in alices  # she reported it
    assert f"No actions involving <@{ALICE_ID}>." in alices


async def test_without_the_archive_moderation_says_it_is_off(bot: RunningBot, fake: FakeDiscord) -> None:
    await bot.start(database_url="")
    assert await moderation(fake, "cases", permissions=STAFF) == NO_ARCHIVE


async def test_a_moderator_without_manage_server_changes_no_watch_list(bot: RunningBot, fake: FakeDiscord) -> None:
    client = await bot.start()
    refused = await moderation(fake, "watch", [option("setting", "on")], permissions=MODERATOR)
    assert refused == "You need the Manage Server permission in this channel to use /parley-admin moderation watch."
    refused = await moderation(fake, "words", [option("words", "hello")], permissions=MODERATOR)
    assert refused.startswith("You need the Manage Server permission")
    assert await client.archive.watched_channels() == {}
    assert (await client.archive.moderation_settings(GUILD_ID)).watch_words == ()
